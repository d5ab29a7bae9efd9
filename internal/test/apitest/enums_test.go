package apitest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestCRDEnumsMatchGoConstants keeps the enum markers and the Go constants in step: a constant
// the schema does not allow could never be written to status (as happened to metal3's
// "detach error").
func TestCRDEnumsMatchGoConstants(t *testing.T) {
	bmh := loadSchema(t, "metal3.io_baremetalhosts.yaml")
	for path, want := range map[string][]string{
		"spec.bootMode":              strs(metal3.UEFI, metal3.UEFISecureBoot, metal3.Legacy),
		"spec.automatedCleaningMode": strs(metal3.CleaningModeMetadata, metal3.CleaningModeDisabled),
		"spec.inspectionMode":        strs(metal3.InspectionModeDisabled, metal3.InspectionModeAgent, metal3.InspectionModeFast),
		"spec.image.checksumType":    strs(metal3.MD5, metal3.SHA256, metal3.SHA512, metal3.AutoChecksum),
		"status.operationalStatus": strs[metal3.OperationalStatus]("", metal3.OperationalStatusOK, metal3.OperationalStatusDiscovered,
			metal3.OperationalStatusError, metal3.OperationalStatusDelayed, metal3.OperationalStatusDetached, metal3.OperationalStatusServicing),
		"status.errorType": strs(metal3.ProvisionedRegistrationError, metal3.RegistrationError, metal3.InspectionError,
			metal3.PreparationError, metal3.ProvisioningError, metal3.PowerManagementError, metal3.ServicingError, metal3.DetachError),
	} {
		requireEnum(t, bmh, path, want)
	}
	requireEnum(t, loadSchema(t, "metal3.io_preprovisioningimages.yaml"), "spec.acceptFormats[]",
		strs(metal3.ImageFormatISO, metal3.ImageFormatInitRD))
	hup := loadSchema(t, "metal3.io_hostupdatepolicies.yaml")
	for _, path := range []string{"spec.firmwareSettings", "spec.firmwareUpdates"} {
		requireEnum(t, hup, path, strs(metal3.HostUpdatePolicyOnPreparing, metal3.HostUpdatePolicyOnReboot))
	}
	prov := loadSchema(t, "metal3.io_provisionings.yaml")
	requireEnum(t, prov, "spec.provisioningNetwork",
		strs(metal3.ProvisioningNetworkManaged, metal3.ProvisioningNetworkUnmanaged, metal3.ProvisioningNetworkDisabled))
	requireEnum(t, prov, "spec.bootIsoSource", strs(metal3.BootIsoSourceLocal, metal3.BootIsoSourceHTTP))
}

func strs[T ~string](values ...T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

func loadSchema(t *testing.T, file string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// requireEnum checks the enum at a dotted path ("[]" steps into array items).
func requireEnum(t *testing.T, schema *apiextensionsv1.JSONSchemaProps, path string, want []string) {
	t.Helper()
	s := schema
	for _, step := range strings.Split(path, ".") {
		name, items := strings.CutSuffix(step, "[]")
		p, ok := s.Properties[name]
		if !ok {
			t.Fatalf("%s: no property %q", path, name)
		}
		s = &p
		if items {
			s = s.Items.Schema
		}
	}
	var got []string
	for _, e := range s.Enum {
		var v string
		if err := yaml.Unmarshal(e.Raw, &v); err != nil {
			t.Fatalf("%s: enum value %s: %v", path, e.Raw, err)
		}
		got = append(got, v)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: CRD enum %q, Go constants %q", path, got, want)
	}
}
