package hostfirmwaresettings

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

var testSchema = map[string]metal3.SettingSchema{
	"ProcTurboMode":       {AttributeType: "Enumeration", AllowableValues: []string{"Enabled", "Disabled"}},
	"PowerOnDelaySeconds": {AttributeType: "Integer", LowerBound: ptr.To(0), UpperBound: ptr.To(300)},
	"MinOnly":             {AttributeType: "Integer", LowerBound: ptr.To(10)},
	"AssetTag":            {AttributeType: "String", MinLength: ptr.To(2), MaxLength: ptr.To(8)},
	"SerialConsole":       {AttributeType: "Boolean"},
	"ProcCores":           {AttributeType: "Enumeration", AllowableValues: []string{"1", "2", "4"}},
	"SystemModelName":     {AttributeType: "String", ReadOnly: ptr.To(true)},
	"AdminPwd":            {AttributeType: "Password"},
	"NoRegistry":          {},
	"Weird":               {AttributeType: "Blob"},
	"NoValuesListed":      {AttributeType: "Enumeration"},
}

func TestValidateSetting(t *testing.T) {
	str, num := intstr.FromString, intstr.FromInt32
	tests := map[string]struct {
		name    string
		value   intstr.IntOrString
		wantErr string // "" for valid
	}{
		"enumeration, allowed":          {"ProcTurboMode", str("Disabled"), ""},
		"enumeration, not allowed":      {"ProcTurboMode", str("Off"), `"Off" is not an allowed value; allowed: Enabled, Disabled`},
		"enumeration is case sensitive": {"ProcTurboMode", str("disabled"), `"disabled" is not an allowed value`},
		"integer as a number":           {"PowerOnDelaySeconds", num(30), ""},
		"integer as a string":           {"PowerOnDelaySeconds", str("300"), ""},
		"integer, not a number":         {"PowerOnDelaySeconds", str("soon"), `"soon" is not an integer`},
		"integer, below the range":      {"PowerOnDelaySeconds", num(-1), "-1 is out of range [0, 300]"},
		"integer, above the range":      {"PowerOnDelaySeconds", num(301), "301 is out of range [0, 300]"},
		"integer, only a lower bound":   {"MinOnly", num(9), "9 is out of range [10, ∞)"},
		"integer, above a lower bound":  {"MinOnly", num(1000000), ""},
		"string within its length":      {"AssetTag", str("rack-7"), ""},
		"string too long":               {"AssetTag", str("rack-seven"), `"rack-seven" is 10 characters long, the length must be in [2, 8]`},
		"string too short":              {"AssetTag", str("r"), "the length must be in [2, 8]"},
		"string given as a number":      {"AssetTag", num(42), ""},
		"string length in characters":   {"AssetTag", str("étagère8"), ""},
		"string too long in characters": {"AssetTag", str("ééééééééé"), `"ééééééééé" is 9 characters long`},
		"enumeration of numbers":        {"ProcCores", num(4), ""},
		"enumeration of numbers, other": {"ProcCores", num(3), `"3" is not an allowed value; allowed: 1, 2, 4`},
		"boolean":                       {"SerialConsole", str("true"), ""},
		"boolean as status shows it":    {"SerialConsole", str("True"), ""},
		"boolean, not a boolean":        {"SerialConsole", str("yes"), `"yes" is not a boolean (true or false)`},
		"read-only":                     {"SystemModelName", str("X"), "read-only setting"},
		"password by type":              {"AdminPwd", str("secret"), "password settings cannot be set"},
		"password by name":              {"BootPassword", str("secret"), "password settings cannot be set"},
		"unknown setting":               {"NoSuchSetting", str("1"), "unknown setting"},
		"no registry: anything goes":    {"NoRegistry", str("whatever"), ""},
		// Ironic keeps no allowable_values when the registry lists none, and then checks none.
		"enumeration listing no values": {"NoValuesListed", str("Anything"), ""},
		"unsupported attribute type":    {"Weird", str("x"), `attribute type "Blob" cannot be set`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := validateSetting(tc.name, tc.value, testSchema)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidateSettingsNamesTheField(t *testing.T) {
	errs := validateSettings(metal3.DesiredSettingsMap{
		"ProcTurboMode": intstr.FromString("Off"), "SerialConsole": intstr.FromString("true"), "AssetTag": intstr.FromString("x"),
	}, testSchema)
	got := errors.Join(errs...).Error()
	want := "spec.settings.AssetTag: \"x\" is 1 characters long, the length must be in [2, 8]\n" +
		"spec.settings.ProcTurboMode: \"Off\" is not an allowed value; allowed: Enabled, Disabled"
	if got != want {
		t.Fatalf("errors:\n%s\nwant (sorted by name, each naming its field):\n%s", got, want)
	}
}
