package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// BIOSAttribute is one entry of the simulated BIOS attribute registry.
type BIOSAttribute struct {
	Name        string
	DisplayName string
	// Type is a Redfish AttributeRegistry type: Enumeration, String, Integer or Boolean.
	Type     string
	Values   []string // Enumeration values
	Lower    int64    // Integer bounds
	Upper    int64
	MaxLen   int // String length limit
	ReadOnly bool
	Default  any
}

// BIOSRegistryName is the AttributeRegistry the Bios resource names; the registry file under
// /redfish/v1/Registries carries the same name.
const BIOSRegistryName = "BiosAttributeRegistry.v1_0_0"

// BIOSAttributes is the simulated BIOS: a small, typical set (boot mode, CPU features, SR-IOV, power
// profile) so that clean and service steps have something real to change and verify.
var BIOSAttributes = []BIOSAttribute{
	{Name: "BootMode", DisplayName: "Boot Mode", Type: "Enumeration", Values: []string{"Uefi", "Bios"}, Default: "Uefi"},
	{Name: "ProcTurboMode", DisplayName: "Turbo Boost", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled"},
	{Name: "ProcVirtualization", DisplayName: "Virtualization Technology", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled"},
	{Name: "LogicalProc", DisplayName: "Logical Processor (Hyper-Threading)", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled"},
	{Name: "ProcCStates", DisplayName: "C-States", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Enabled"},
	{Name: "SriovGlobalEnable", DisplayName: "SR-IOV Global Enable", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, Default: "Disabled"},
	{Name: "SysProfile", DisplayName: "System Profile", Type: "Enumeration", Values: []string{"PerfPerWattOptimizedDapc", "PerfOptimized", "Custom"}, Default: "PerfPerWattOptimizedDapc"},
	{Name: "NumLock", DisplayName: "NumLock", Type: "Enumeration", Values: []string{"On", "Off"}, Default: "On"},
	{Name: "PowerOnDelaySeconds", DisplayName: "Power-On Delay (s)", Type: "Integer", Lower: 0, Upper: 300, Default: int64(0)},
	{Name: "AssetTag", DisplayName: "Asset Tag", Type: "String", MaxLen: 63, Default: ""},
	{Name: "SerialConsole", DisplayName: "Serial Console Redirection", Type: "Boolean", Default: false},
	{Name: "SystemModelName", DisplayName: "System Model Name", Type: "String", ReadOnly: true, MaxLen: 63, Default: ""},
}

// BIOSAttributeByName finds a registry entry.
func BIOSAttributeByName(name string) (BIOSAttribute, bool) {
	for _, a := range BIOSAttributes {
		if a.Name == name {
			return a, true
		}
	}
	return BIOSAttribute{}, false
}

// ErrValueType marks a value of the wrong JSON type for its attribute (Redfish
// PropertyValueTypeError).
var ErrValueType = errors.New("wrong value type")

// Check reports whether v (as decoded from JSON) is a valid value. Like a real BMC it takes only
// the JSON type of the attribute's registry type: a string for Enumeration and String, a number
// for Integer (the string "30" is refused), a boolean for Boolean (not "true"), so that a client
// that sends the type the YAML happened to have is caught here.
func (a BIOSAttribute) Check(v any) error {
	switch a.Type {
	case "Enumeration":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%w: value %#v is not a string", ErrValueType, v)
		}
		if !slices.Contains(a.Values, s) {
			return fmt.Errorf("value %q is not one of %v", s, a.Values)
		}
	case "String":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%w: value %#v is not a string", ErrValueType, v)
		}
		if a.MaxLen > 0 && utf8.RuneCountInString(s) > a.MaxLen {
			return fmt.Errorf("value is longer than %d characters", a.MaxLen)
		}
	case "Integer":
		var n float64
		switch t := v.(type) {
		case float64:
			n = t
		case int64:
			n = float64(t)
		case int:
			n = float64(t)
		default:
			return fmt.Errorf("%w: value %#v is not a number", ErrValueType, v)
		}
		if n != math.Trunc(n) || n < float64(a.Lower) || n > float64(a.Upper) {
			return fmt.Errorf("value %v is not an integer between %d and %d", v, a.Lower, a.Upper)
		}
	case "Boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%w: value %#v is not a boolean", ErrValueType, v)
		}
	}
	return nil
}
