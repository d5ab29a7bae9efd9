package config

import (
	"errors"
	"strings"
	"testing"
)

func TestBIOSAttributeCheck(t *testing.T) {
	tests := map[string]struct {
		attr  string
		value any
		ok    bool
	}{
		"enumeration value":        {"ProcTurboMode", "Disabled", true},
		"enumeration outside list": {"ProcTurboMode", "Off", false},
		"enumeration wrong type":   {"ProcTurboMode", true, false},
		"integer from JSON":        {"PowerOnDelaySeconds", float64(30), true},
		"integer as a string":      {"PowerOnDelaySeconds", "30", false},
		"integer out of bounds":    {"PowerOnDelaySeconds", float64(301), false},
		"integer with a fraction":  {"PowerOnDelaySeconds", 1.5, false},
		"integer as a word":        {"PowerOnDelaySeconds", "soon", false},
		"string":                   {"AssetTag", "rack-4", true},
		"string as a number":       {"AssetTag", float64(1234), false},
		"string too long":          {"AssetTag", string(make([]byte, 64)), false},
		"string of 63 characters":  {"AssetTag", strings.Repeat("é", 63), true},
		"boolean":                  {"SerialConsole", true, true},
		"boolean as a string":      {"SerialConsole", "false", false},
		"boolean wrong string":     {"SerialConsole", "yes", false},
	}
	// The values of the wrong JSON type (a real BMC answers PropertyValueTypeError).
	typeErrors := map[string]bool{"enumeration wrong type": true, "integer as a string": true, "integer as a word": true,
		"string as a number": true, "boolean as a string": true, "boolean wrong string": true}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, ok := BIOSAttributeByName(tc.attr)
			if !ok {
				t.Fatalf("no attribute %s", tc.attr)
			}
			err := a.Check(tc.value)
			if (err == nil) != tc.ok {
				t.Errorf("Check(%v) = %v, want ok=%v", tc.value, err, tc.ok)
			}
			if wrongType := typeErrors[name]; errors.Is(err, ErrValueType) != wrongType {
				t.Errorf("Check(%v) = %v: a type error is %v, want %v", tc.value, err, errors.Is(err, ErrValueType), wrongType)
			}
		})
	}
}

func TestDefaultIsValid(t *testing.T) {
	cfg := Default()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the default configuration is invalid: %v", err)
	}
	cfg.Profile.BIOS = map[string]any{"ProcTurboMode": "Sometimes"}
	if cfg.Validate() == nil {
		t.Error("an invalid BIOS default was accepted")
	}
}
