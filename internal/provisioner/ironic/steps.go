package ironic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// customDeployPriority is the priority of a custom deploy step, as in metal3.
const customDeployPriority = 80

// biosStep is bios.apply_configuration with the settings sorted by name (a stable request, and a
// stable fingerprint). Integers stay integers; Ironic's redfish BIOS interface sends them as given.
func biosStep(settings metal3.DesiredSettingsMap) (nodes.CleanStep, bool) {
	if len(settings) == 0 {
		return nodes.CleanStep{}, false
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	slices.Sort(names)
	list := make([]map[string]any, 0, len(names))
	for _, name := range names {
		v := settings[name]
		var value any = v.String()
		if v.Type == intstr.Int {
			value = v.IntValue()
		}
		list = append(list, map[string]any{"name": name, "value": value})
	}
	return nodes.CleanStep{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{"settings": list}}, true
}

// firmwareStep is firmware.update with one entry per component, in the order given.
func firmwareStep(updates []metal3.FirmwareUpdate) (nodes.CleanStep, bool) {
	if len(updates) == 0 {
		return nodes.CleanStep{}, false
	}
	list := make([]map[string]any, 0, len(updates))
	for _, u := range updates {
		list = append(list, map[string]any{"component": u.Component, "url": u.URL})
	}
	return nodes.CleanStep{Interface: nodes.InterfaceFirmware, Step: "update", Args: map[string]any{"settings": list}}, true
}

// customDeploySteps is the one deploy step that runs a custom deploy method (an agent hardware
// manager's step, e.g. install_coreos); nil without a method.
func customDeploySteps(cd *metal3.CustomDeploy) []nodes.DeployStep {
	if cd == nil || cd.Method == "" {
		return nil
	}
	return []nodes.DeployStep{{Interface: nodes.InterfaceDeploy, Step: cd.Method, Args: map[string]any{}, Priority: customDeployPriority}}
}

// rootDeviceHints converts hints to Ironic's properties/root_device, with the operators metal3 uses
// ("s==" exact string, "<in>" substring, ">=" size).
func rootDeviceHints(h *metal3.RootDeviceHints) map[string]any {
	if h == nil {
		return nil
	}
	m := map[string]any{}
	if h.DeviceName != "" {
		if strings.HasPrefix(h.DeviceName, "/dev/disk/by-path/") {
			m["by_path"] = "s== " + h.DeviceName
		} else {
			m["name"] = "s== " + h.DeviceName
		}
	}
	if h.HCTL != "" {
		m["hctl"] = "s== " + h.HCTL
	}
	if h.Model != "" {
		m["model"] = "<in> " + h.Model
	}
	if h.Vendor != "" {
		m["vendor"] = "<in> " + h.Vendor
	}
	if h.SerialNumber != "" {
		m["serial"] = "s== " + h.SerialNumber
	}
	if h.MinSizeGigabytes != 0 {
		m["size"] = ">= " + strconv.Itoa(h.MinSizeGigabytes)
	}
	if h.WWN != "" {
		m["wwn"] = "s== " + h.WWN
	}
	if h.WWNWithExtension != "" {
		m["wwn_with_extension"] = "s== " + h.WWNWithExtension
	}
	if h.WWNVendorExtension != "" {
		m["wwn_vendor_extension"] = "s== " + h.WWNVendorExtension
	}
	if h.Rotational != nil {
		m["rotational"] = *h.Rotational
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// fingerprint identifies a request (steps and settings) so that a finished operation is not run
// again for the same request; it is stored in the node's extra.
func fingerprint(parts ...any) string {
	b, _ := json.Marshal(parts) // plain data: maps, slices, strings, numbers
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
