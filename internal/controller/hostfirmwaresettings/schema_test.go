package hostfirmwaresettings

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func TestSchemaNameIsContentAddressed(t *testing.T) {
	a := map[string]metal3.SettingSchema{
		"ProcTurboMode": {AttributeType: "Enumeration", AllowableValues: []string{"Enabled", "Disabled"}},
		"Delay":         {AttributeType: "Integer", LowerBound: ptr.To(0), UpperBound: ptr.To(300)},
	}
	same := map[string]metal3.SettingSchema{
		"Delay":         {AttributeType: "Integer", LowerBound: ptr.To(0), UpperBound: ptr.To(300)},
		"ProcTurboMode": {AttributeType: "Enumeration", AllowableValues: []string{"Enabled", "Disabled"}},
	}
	bound := map[string]metal3.SettingSchema{
		"ProcTurboMode": {AttributeType: "Enumeration", AllowableValues: []string{"Enabled", "Disabled"}},
		"Delay":         {AttributeType: "Integer", LowerBound: ptr.To(0), UpperBound: ptr.To(600)},
	}
	name := schemaName(a)
	if !strings.HasPrefix(name, "schema-") || len(name) != len("schema-")+16 {
		t.Fatalf("name %q: want schema- and 16 hex digits", name)
	}
	if got := schemaName(same); got != name {
		t.Errorf("the same schema built in another order is named %q, want %q", got, name)
	}
	if got := schemaName(bound); got == name {
		t.Errorf("a schema with another bound has the same name %q", got)
	}
}

func TestPublishedSchemaDropsPasswords(t *testing.T) {
	got := publishedSchema(map[string]metal3.SettingSchema{
		"ProcTurboMode": {AttributeType: "Enumeration"},
		"AdminPassword": {AttributeType: "String"},
		"SetupPwd":      {AttributeType: "Password"},
	})
	if _, ok := got["ProcTurboMode"]; len(got) != 1 || !ok {
		t.Fatalf("published schema %v: want only ProcTurboMode", got)
	}
}
