package hostfirmwaresettings

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Attribute types of a FirmwareSchema (Ironic's BIOS registry types).
const (
	typeEnumeration = "Enumeration"
	typeString      = "String"
	typeInteger     = "Integer"
	typeBoolean     = "Boolean"
	typePassword    = "Password"
)

// isPassword: password settings are neither shown in status nor settable (metal3 drops every name
// containing "Password", as some vendors report encrypted passwords as plain settings).
func isPassword(name string, s metal3.SettingSchema) bool {
	return strings.Contains(name, "Password") || s.AttributeType == typePassword
}

// validateSettings checks every setting of the spec against the schema the host reports, in name
// order. Each error names the setting (as its spec field) and the rule it breaks.
func validateSettings(spec metal3.DesiredSettingsMap, schema map[string]metal3.SettingSchema) []error {
	names := make([]string, 0, len(spec))
	for name := range spec {
		names = append(names, name)
	}
	slices.Sort(names)
	var errs []error
	for _, name := range names {
		if err := validateSetting(name, spec[name], schema); err != nil {
			errs = append(errs, fmt.Errorf("spec.settings.%s: %w", name, err))
		}
	}
	return errs
}

// validateSetting checks one value. A setting whose registry entry has no type (the BMC published
// no attribute registry, or Ironic could not read it) can only be checked for existence.
func validateSetting(name string, v intstr.IntOrString, schema map[string]metal3.SettingSchema) error {
	s, known := schema[name]
	switch {
	case isPassword(name, s):
		return fmt.Errorf("password settings cannot be set through HostFirmwareSettings")
	case !known:
		return fmt.Errorf("unknown setting: the host's firmware has no setting of this name")
	case s.ReadOnly != nil && *s.ReadOnly:
		return fmt.Errorf("read-only setting: the host's firmware does not allow changing it")
	}
	value := v.String()
	switch s.AttributeType {
	case "":
		return nil
	case typeEnumeration:
		// A registry entry that lists no values leaves Ironic with none (None or []), and Ironic
		// then checks none: refusing every value would refuse what Ironic applies.
		if len(s.AllowableValues) > 0 && !slices.Contains(s.AllowableValues, value) {
			return fmt.Errorf("%q is not an allowed value; allowed: %s", value, strings.Join(s.AllowableValues, ", "))
		}
	case typeInteger:
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("%q is not an integer", value)
		}
		if out, rng := outOfRange(n, s.LowerBound, s.UpperBound); out {
			return fmt.Errorf("%d is out of range %s", n, rng)
		}
	case typeString:
		// Redfish lengths count characters, as Ironic's check does (Python str), not bytes.
		n := utf8.RuneCountInString(value)
		if out, rng := outOfRange(n, s.MinLength, s.MaxLength); out {
			return fmt.Errorf("%q is %d characters long, the length must be in %s", value, n, rng)
		}
	case typeBoolean:
		// Any case: status shows Ironic's True and False, which a user may copy.
		if !strings.EqualFold(value, "true") && !strings.EqualFold(value, "false") {
			return fmt.Errorf("%q is not a boolean (true or false)", value)
		}
	default:
		return fmt.Errorf("attribute type %q cannot be set", s.AttributeType)
	}
	return nil
}

// outOfRange checks n against optional bounds and describes the range, e.g. "[0, 300]", "[0, ∞)".
func outOfRange(n int, lower, upper *int) (bool, string) {
	lo, hi := "(-∞", "∞)"
	out := false
	if lower != nil {
		lo = "[" + strconv.Itoa(*lower)
		out = n < *lower
	}
	if upper != nil {
		hi = strconv.Itoa(*upper) + "]"
		out = out || n > *upper
	}
	return out, lo + ", " + hi
}
