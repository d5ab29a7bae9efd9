package config

import "testing"

func TestBIOSAttributeCheck(t *testing.T) {
	tests := map[string]struct {
		attr  string
		value any
		ok    bool
	}{
		"enumeration value":          {"ProcTurboMode", "Disabled", true},
		"enumeration outside list":   {"ProcTurboMode", "Off", false},
		"enumeration wrong type":     {"ProcTurboMode", true, false},
		"integer from JSON":          {"PowerOnDelaySeconds", float64(30), true},
		"integer as a string":        {"PowerOnDelaySeconds", "30", true},
		"integer out of bounds":      {"PowerOnDelaySeconds", float64(301), false},
		"integer with a fraction":    {"PowerOnDelaySeconds", 1.5, false},
		"integer string not numeric": {"PowerOnDelaySeconds", "soon", false},
		"string":                     {"AssetTag", "rack-4", true},
		"string too long":            {"AssetTag", string(make([]byte, 64)), false},
		"boolean":                    {"SerialConsole", true, true},
		"boolean as a string":        {"SerialConsole", "false", true},
		"boolean wrong string":       {"SerialConsole", "yes", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, ok := BIOSAttributeByName(tc.attr)
			if !ok {
				t.Fatalf("no attribute %s", tc.attr)
			}
			if err := a.Check(tc.value); (err == nil) != tc.ok {
				t.Errorf("Check(%v) = %v, want ok=%v", tc.value, err, tc.ok)
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
