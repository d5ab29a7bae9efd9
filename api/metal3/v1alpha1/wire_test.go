package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// JSON shapes that differ from Go naming on purpose, as metal3 writes them.
func TestWireShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		value any
		want  string
	}{
		"provisioning ID is upper case": {ProvisionStatus{State: StateProvisioned, ID: "uuid"}, `"ID":"uuid"`},
		"image format key":              {Image{URL: "u", DiskFormat: new(string)}, `"format":""`},
		"credentials keys":              {CredentialsStatus{Version: "7"}, `{"credentialsVersion":"7"}`},
		"hardware key":                  {BareMetalHostStatus{HardwareDetails: &HardwareDetails{}}, `"hardware":{`},
		"PPI imageUrl":                  {PreprovisioningImageStatus{ImageURL: "u"}, `"imageUrl":"u"`},
		"schema snake case":             {SettingSchema{AttributeType: "Integer"}, `{"attribute_type":"Integer"}`},
		"HFS status schema key":         {HostFirmwareSettingsStatus{FirmwareSchema: &SchemaReference{}}, `"schema":{`},
		"Provisioning status is inline": {ProvisioningStatus{OperatorStatus{ObservedGeneration: 3}}, `{"observedGeneration":3,"readyReplicas":0}`},
	} {
		data, err := json.Marshal(tc.value)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(string(data), tc.want) {
			t.Errorf("%s: %s does not contain %s", name, data, tc.want)
		}
	}
}

// The annotation values CAPM3 and users write decode into the argument types.
func TestAnnotationArguments(t *testing.T) {
	var reboot RebootAnnotationArguments
	if err := json.Unmarshal([]byte(`{"mode":"soft","force":true}`), &reboot); err != nil {
		t.Fatal(err)
	}
	if reboot != (RebootAnnotationArguments{Mode: RebootModeSoft, Force: true}) {
		t.Errorf("reboot arguments decoded as %+v", reboot)
	}
	var detached DetachedAnnotationArguments
	if err := json.Unmarshal([]byte(`{"deleteAction":"delay"}`), &detached); err != nil {
		t.Fatal(err)
	}
	if detached != (DetachedAnnotationArguments{DeleteAction: DetachedDeleteActionDelay}) {
		t.Errorf("detached arguments decoded as %+v", detached)
	}
}

func TestEveryKindIsRegistered(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{
		"BareMetalHost", "HardwareData", "PreprovisioningImage", "HostFirmwareSettings", "FirmwareSchema",
		"HostFirmwareComponents", "HostUpdatePolicy", "DataImage", "BMCEventSubscription", "Provisioning",
	} {
		for _, k := range []string{kind, kind + "List"} {
			if !s.Recognizes(GroupVersion.WithKind(k)) {
				t.Errorf("%s is not registered in %s", k, GroupVersion)
			}
		}
	}
}
