package webhooks

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
)

var (
	// hostNameForbidden matches a character Ironic does not accept in a node name.
	hostNameForbidden = regexp.MustCompile(`[^A-Za-z0-9._-]`)
	// macAddress is the only MAC form Ironic accepts for a port: six colon-separated bytes.
	macAddress = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)
)

var (
	checksumTypes   = []metal3.ChecksumType{"", metal3.MD5, metal3.SHA256, metal3.SHA512, metal3.AutoChecksum}
	diskFormats     = []string{"raw", "qcow2", "vdi", "vmdk", metal3.DiskFormatLiveISO}
	inspectionModes = []metal3.InspectionMode{"", metal3.InspectionModeDisabled, metal3.InspectionModeAgent, metal3.InspectionModeFast}
	imageURLSchemes = []string{"http", "https", "oci", "file"}
)

// ValidateBareMetalHost returns what is wrong with a host on its own, whether it is being created
// or updated. Transition rules are in ValidateBareMetalHostUpdate.
func ValidateBareMetalHost(host *metal3.BareMetalHost) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateHostName(host.Name, field.NewPath("metadata", "name"))...)
	errs = append(errs, validateBMC(host, spec)...)
	errs = append(errs, validateSecretReferences(host, spec)...)
	if host.Spec.Image != nil {
		errs = append(errs, validateImage(host.Spec.Image, spec.Child("image"))...)
	}
	errs = append(errs, validateRAID(host.Spec.RAID, spec.Child("raid"))...)
	if host.Spec.Firmware != nil {
		errs = append(errs, field.Forbidden(spec.Child("firmware"),
			"no longer supported, use HostFirmwareSettings (a HostFirmwareSettings of the host's name holds its BIOS settings)"))
	}
	if h := host.Spec.RootDeviceHints; h != nil {
		errs = append(errs, validateDeviceName(h.DeviceName, spec.Child("rootDeviceHints", "deviceName"))...)
	}
	if host.Spec.DisablePowerOff && !host.Spec.Online {
		errs = append(errs, field.Invalid(spec.Child("disablePowerOff"), true,
			"cannot be true while spec.online is false: a host whose power off is disabled cannot be kept off; set online: true or disablePowerOff: false"))
	}
	errs = append(errs, validateInspectionMode(host, spec.Child("inspectionMode"))...)
	errs = append(errs, validateHostAnnotations(host)...)
	return errs
}

// ValidateBareMetalHostUpdate returns what is wrong with changing oldHost into newHost: the
// errors of newHost that oldHost did not already have, plus the transition rules. Status is read
// from newHost, which on a spec update carries the stored status.
func ValidateBareMetalHostUpdate(oldHost, newHost *metal3.BareMetalHost) field.ErrorList {
	return append(newErrors(ValidateBareMetalHost(newHost), ValidateBareMetalHost(oldHost)),
		validateTransitions(oldHost, newHost)...)
}

// validateTransitions returns the rules an update breaks whatever the rest of the spec: what
// may not change in the host's state. They hold for a host being deleted too: its Ironic node
// still cleans and powers off the machine behind the BMC address.
func validateTransitions(oldHost, newHost *metal3.BareMetalHost) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")

	if oldAddr, newAddr := oldHost.Spec.BMC.Address, newHost.Spec.BMC.Address; oldAddr != "" && newAddr != oldAddr && !bmcAddressChangeable(newHost) {
		errs = append(errs, field.Forbidden(spec.Child("bmc", "address"), fmt.Sprintf(
			"cannot be changed while the host is %q and %q: only while registering (status.provisioning.state %q) or detached (the %s annotation, status.operationalStatus %q); detach the host, change the address, then remove the annotation",
			newHost.Status.Provisioning.State, newHost.Status.OperationalStatus, metal3.StateRegistering,
			metal3.DetachedAnnotation, metal3.OperationalStatusDetached)))
	}

	if oldMAC := oldHost.Spec.BootMACAddress; oldMAC != "" && !strings.EqualFold(oldMAC, newHost.Spec.BootMACAddress) {
		errs = append(errs, field.Forbidden(spec.Child("bootMACAddress"),
			fmt.Sprintf("cannot be changed once set (it was %q); delete and re-create the host to use another NIC", oldMAC)))
	}

	if !oldHost.Spec.ExternallyProvisioned && newHost.Spec.ExternallyProvisioned {
		if state := newHost.Status.Provisioning.State; state != metal3.StateAvailable && state != metal3.StateReady {
			errs = append(errs, field.Forbidden(spec.Child("externallyProvisioned"), fmt.Sprintf(
				"can only be turned on at creation or while status.provisioning.state is %q; the host is %q",
				metal3.StateAvailable, state)))
		}
	}
	return errs
}

// bmcAddressChangeable: the BMC address may change while the host is registering (fixing a
// typo that keeps registration failing) or detached from the provisioner (no Ironic node uses
// the old address), as in metal3. A detach that is only requested does not count: the host
// controller defers it in the states that do not allow one (inspecting, provisioning, a live
// update...), and meanwhile it would register the running node again with the new address.
func bmcAddressChangeable(newHost *metal3.BareMetalHost) bool {
	return newHost.Status.Provisioning.State == metal3.StateRegistering ||
		newHost.Status.OperationalStatus == metal3.OperationalStatusDetached
}

// validateHostName: the host's name becomes the Ironic node name, which Ironic restricts to
// these characters and would confuse with a node UUID if it looked like one.
func validateHostName(name string, path *field.Path) field.ErrorList {
	if hostNameForbidden.MatchString(name) {
		return field.ErrorList{field.Invalid(path, name, "may only contain the characters [A-Za-z0-9._-]")}
	}
	if _, err := uuid.Parse(name); err == nil {
		return field.ErrorList{field.Invalid(path, name, "cannot be a UUID: the provisioner would take it for a node UUID; use any other name")}
	}
	return nil
}

// validateBMC checks the BMC address and what the host asks of that kind of BMC, and the boot
// MAC address.
func validateBMC(host *metal3.BareMetalHost, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	macPath := spec.Child("bootMACAddress")
	mac := host.Spec.BootMACAddress
	if mac != "" && !macAddress.MatchString(mac) {
		errs = append(errs, field.Invalid(macPath, mac, "must be six colon-separated hexadecimal bytes, xx:xx:xx:xx:xx:xx"))
	}

	address := host.Spec.BMC.Address
	if address == "" {
		return errs
	}
	addrPath := spec.Child("bmc", "address")
	access, err := bmc.Parse(address)
	if err != nil {
		// The AddressError's copy of the address has any user:password@ removed; the raw address
		// must not be echoed.
		var addrErr *bmc.AddressError
		if errors.As(err, &addrErr) {
			return append(errs, field.Invalid(addrPath, addrErr.Address, addrErr.Reason))
		}
		return append(errs, field.Invalid(addrPath, field.OmitValueType{}, err.Error()))
	}

	hardwareRAID := host.Spec.RAID != nil && len(host.Spec.RAID.HardwareRAIDVolumes) > 0
	macRequired := false
	for _, e := range splitJoined(access.Validate(mac, string(host.BootMode()), hardwareRAID)) {
		var capErr *bmc.CapabilityError
		if !errors.As(e, &capErr) {
			errs = append(errs, field.Invalid(addrPath, access.String(), e.Error()))
			continue
		}
		path := spec.Child(strings.Split(capErr.Field, ".")[0], strings.Split(capErr.Field, ".")[1:]...)
		detail := fmt.Sprintf("BMC address type %q %s", capErr.Type, capErr.Reason)
		switch {
		case errors.Is(capErr, bmc.ErrBootMACRequired):
			macRequired = true
			errs = append(errs, field.Required(path, detail))
		case errors.Is(capErr, bmc.ErrSecureBootUnsupported):
			errs = append(errs, field.Invalid(path, host.Spec.BootMode, detail))
		default:
			errs = append(errs, field.Forbidden(path, detail))
		}
	}
	if host.Spec.InspectionMode == metal3.InspectionModeFast && access.Interfaces.Inspect == "" {
		// As metal3's webhook: the provisioner would inspect with the agent instead, booting a
		// ramdisk over the provisioning network the user chose fast inspection to do without.
		errs = append(errs, field.Invalid(spec.Child("inspectionMode"), host.Spec.InspectionMode, fmt.Sprintf(
			"BMC address type %q cannot inspect out-of-band; use agent (the default), or a Redfish-based BMC address", access.Type)))
	}
	if !macRequired && mac == "" && host.InspectionDisabled() {
		errs = append(errs, field.Required(macPath,
			"required when inspection is disabled (spec.inspectionMode or the inspect.metal3.io annotation): the NIC to provision through is not discovered then"))
	}
	return errs
}

// splitJoined undoes errors.Join.
func splitJoined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// validateSecretReferences: a host may only use Secrets of its own namespace; anything else
// would let whoever can create hosts read any Secret through the operator.
func validateSecretReferences(host *metal3.BareMetalHost, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, ref := range []struct {
		name string
		ref  *corev1.SecretReference
	}{
		{"userData", host.Spec.UserData},
		{"networkData", host.Spec.NetworkData},
		{"metaData", host.Spec.MetaData},
	} {
		if ref.ref != nil && ref.ref.Namespace != "" && ref.ref.Namespace != host.Namespace {
			errs = append(errs, field.Invalid(spec.Child(ref.name, "namespace"), ref.ref.Namespace, fmt.Sprintf(
				"cross-namespace Secret references are not allowed: leave it empty or set it to the host's namespace %q", host.Namespace)))
		}
	}
	return errs
}

func validateImage(image *metal3.Image, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if image.URL == "" {
		errs = append(errs, field.Required(path.Child("url"), "the image to write: an "+quoteSchemes(imageURLSchemes)+" URL"))
	} else if _, err := parseURL(image.URL, imageURLSchemes...); err != nil {
		errs = append(errs, field.Invalid(path.Child("url"), image.URL, err.Error()))
	}

	if image.DiskFormat != nil && !slices.Contains(diskFormats, *image.DiskFormat) {
		errs = append(errs, field.NotSupported(path.Child("format"), *image.DiskFormat, diskFormats))
	}
	if !slices.Contains(checksumTypes, image.ChecksumType) {
		errs = append(errs, field.NotSupported(path.Child("checksumType"), image.ChecksumType, checksumTypes[1:]))
	}
	// A live ISO is booted, not written, so nothing verifies it; an OCI image carries its digest.
	if image.Checksum == "" && !image.IsLiveISO() && !image.IsOCI() {
		errs = append(errs, field.Required(path.Child("checksum"),
			fmt.Sprintf("required unless format is %q or the URL is oci://: the checksum value or the URL of a checksum file", metal3.DiskFormatLiveISO)))
	}
	return errs
}

func validateInspectionMode(host *metal3.BareMetalHost, path *field.Path) field.ErrorList {
	mode := host.Spec.InspectionMode
	if !slices.Contains(inspectionModes, mode) {
		return field.ErrorList{field.NotSupported(path, mode, inspectionModes[1:])}
	}
	if mode != "" && mode != metal3.InspectionModeDisabled &&
		host.Annotations[metal3.InspectAnnotationPrefix] == metal3.InspectAnnotationValueDisabled {
		return field.ErrorList{field.Invalid(path, mode, fmt.Sprintf(
			"contradicts the annotation %s: %s; use spec.inspectionMode: disabled and remove the annotation, or remove the annotation to inspect",
			metal3.InspectAnnotationPrefix, metal3.InspectAnnotationValueDisabled))}
	}
	return nil
}
