package ironic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
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
// stable fingerprint). Each value keeps the form it was written in (a number or a string) until
// typeBIOSSteps gives it the type of its registry attribute, just before the steps are sent.
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

// Registry attribute types that take a JSON value other than a string.
const (
	biosInteger = "Integer"
	biosBoolean = "Boolean"
)

// typeBIOSSteps returns steps with each value of their bios.apply_configuration settings in the
// JSON type its attribute type in the node's BIOS registry (types, by name) calls for: Integer a
// number, Boolean a boolean, the others (Enumeration, String, …) a string. The form a value was
// written in (a YAML number or a quoted string) says nothing about its type: an Enumeration of
// numbers (ProcCores: 4) takes the string "4", a quoted Integer ("30") the number 30. Redfish BMCs
// reject a value of the wrong type, and Ironic checks and compares values as sent (a number for a
// String attribute fails its length check). A setting whose type the registry does not say keeps
// its written form, and so does a value that does not parse as its type (the HostFirmwareSettings
// validation refused it; Ironic reports it). steps is not changed; nil types changes nothing.
func typeBIOSSteps(steps []nodes.CleanStep, types map[string]string) []nodes.CleanStep {
	out := slices.Clone(steps)
	for i, st := range out {
		list, ok := st.Args["settings"].([]map[string]any)
		if !isBIOSApply(st) || !ok {
			continue
		}
		typed := make([]map[string]any, len(list))
		for j, setting := range list {
			name, _ := setting["name"].(string)
			typed[j] = map[string]any{"name": name, "value": typeBIOSValue(setting["value"], types[name])}
		}
		args := maps.Clone(st.Args)
		args["settings"] = typed
		out[i].Args = args
	}
	return out
}

// typeBIOSValue converts a value written as an int or a string (biosStep) to attrType's JSON type.
func typeBIOSValue(v any, attrType string) any {
	var text string
	switch t := v.(type) {
	case string:
		text = t
	case int:
		text = strconv.Itoa(t)
	default:
		return v
	}
	switch attrType {
	case "":
		return v
	case biosInteger:
		if n, err := strconv.Atoi(text); err == nil {
			return n
		}
		return v
	case biosBoolean:
		if strings.EqualFold(text, "true") || strings.EqualFold(text, "false") {
			return strings.EqualFold(text, "true")
		}
		return v
	}
	return text
}

// isBIOSApply: the step is bios.apply_configuration.
func isBIOSApply(st nodes.CleanStep) bool {
	return st.Interface == nodes.InterfaceBIOS && st.Step == "apply_configuration"
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
// rootDeviceProperty is the value of properties/root_device for the hints: nil (an untyped nil,
// which setKeys removes) when there are none, so that hints taken out of the spec leave the node
// too rather than steer the next deployment to the old disk.
func rootDeviceProperty(h *metal3.RootDeviceHints) any {
	if hints := rootDeviceHints(h); hints != nil {
		return hints
	}
	return nil
}

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
