package apitest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// TestSchemaRejectsInvalidValues checks that the API server itself (no webhook) rejects values
// outside metal3's enums and patterns, naming the field.
func TestSchemaRejectsInvalidValues(t *testing.T) {
	ns := env.Namespace(t)
	host := func(mutate func(*metal3.BareMetalHost)) client.Object {
		h := builder.BareMetalHost(ns, "invalid").
			WithBMC("redfish://10.0.0.5/redfish/v1/Systems/1", "bmc").
			WithImage("http://images.example.com/os.qcow2", "0123abcd").Build()
		mutate(h)
		return h
	}
	for name, tc := range map[string]struct {
		obj   client.Object
		field string
	}{
		"bootMode":              {host(func(h *metal3.BareMetalHost) { h.Spec.BootMode = "bios" }), "spec.bootMode"},
		"checksumType":          {host(func(h *metal3.BareMetalHost) { h.Spec.Image.ChecksumType = "crc32" }), "spec.image.checksumType"},
		"image format":          {host(func(h *metal3.BareMetalHost) { h.Spec.Image.DiskFormat = ptr.To("iso") }), "spec.image.format"},
		"automatedCleaningMode": {host(func(h *metal3.BareMetalHost) { h.Spec.AutomatedCleaningMode = "always" }), "spec.automatedCleaningMode"},
		"inspectionMode":        {host(func(h *metal3.BareMetalHost) { h.Spec.InspectionMode = "slow" }), "spec.inspectionMode"},
		"bootMACAddress":        {host(func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "not-a-mac" }), "spec.bootMACAddress"},
		"hardware RAID level": {host(func(h *metal3.BareMetalHost) {
			h.Spec.RAID = &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{{Level: "7"}}}
		}), "spec.raid.hardwareRAIDVolumes[0].level"},
		"software RAID with one disk": {host(func(h *metal3.BareMetalHost) {
			h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{Level: "1", PhysicalDisks: []metal3.RootDeviceHints{{DeviceName: "/dev/sda"}}}}}
		}), "spec.raid.softwareRAIDVolumes[0].physicalDisks"},
		"PPI acceptFormats": {&metal3.PreprovisioningImage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invalid"},
			Spec:       metal3.PreprovisioningImageSpec{AcceptFormats: []metal3.ImageFormat{"pxe"}},
		}, "spec.acceptFormats[0]"},
		"HostUpdatePolicy": {&metal3.HostUpdatePolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invalid"},
			Spec:       metal3.HostUpdatePolicySpec{FirmwareUpdates: "always"},
		}, "spec.firmwareUpdates"},
		"provisioningNetwork": {&metal3.Provisioning{
			ObjectMeta: metav1.ObjectMeta{Name: "invalid-network"},
			Spec:       metal3.ProvisioningSpec{ProvisioningNetwork: "Sometimes"},
		}, "spec.provisioningNetwork"},
		"bootIsoSource": {&metal3.Provisioning{
			ObjectMeta: metav1.ObjectMeta{Name: "invalid-iso-source"},
			Spec:       metal3.ProvisioningSpec{BootIsoSource: "ftp"},
		}, "spec.bootIsoSource"},
		"sensorCollectionInterval": {&metal3.Provisioning{
			ObjectMeta: metav1.ObjectMeta{Name: "invalid-interval"},
			Spec:       metal3.ProvisioningSpec{PrometheusExporter: &metal3.PrometheusExporter{Enabled: true, SensorCollectionInterval: 30}},
		}, "spec.prometheusExporter.sensorCollectionInterval"},
	} {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tc.obj)
			if err == nil {
				_ = env.Client.Delete(context.Background(), tc.obj)
			}
			requireInvalid(t, err, tc.field)
		})
	}
}

// TestStatusSchemaRejectsInvalidValues writes invalid status values through the status
// subresource.
func TestStatusSchemaRejectsInvalidValues(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	h := builder.BareMetalHost(ns, "status").Build()
	if err := env.Client.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	valid := metal3.BareMetalHostStatus{
		OperationalStatus: metal3.OperationalStatusOK,
		Provisioning:      metal3.ProvisionStatus{State: metal3.StateAvailable},
	}
	for name, tc := range map[string]struct {
		mutate func(*metal3.BareMetalHostStatus)
		field  string // empty: the value is valid
	}{
		"operationalStatus":     {func(s *metal3.BareMetalHostStatus) { s.OperationalStatus = "broken" }, "status.operationalStatus"},
		"errorType":             {func(s *metal3.BareMetalHostStatus) { s.ErrorType = "bogus error" }, "status.errorType"},
		"servicing is valid":    {func(s *metal3.BareMetalHostStatus) { s.OperationalStatus = metal3.OperationalStatusServicing }, ""},
		"detach error is valid": {func(s *metal3.BareMetalHostStatus) { s.ErrorType = metal3.DetachError }, ""},
		"duplicate condition": {func(s *metal3.BareMetalHostStatus) {
			s.Conditions = []metav1.Condition{condition("Ready", "Provisioned", 1), condition("Ready", "Error", 2)}
		}, "status.conditions[1]"},
		"too many conditions": {func(s *metal3.BareMetalHostStatus) {
			for i := range 33 {
				s.Conditions = append(s.Conditions, condition(fmt.Sprintf("Type%d", i), "Reason", 1))
			}
		}, "status.conditions"},
	} {
		t.Run(name, func(t *testing.T) {
			var cur metal3.BareMetalHost
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(h), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Status = *valid.DeepCopy()
			tc.mutate(&cur.Status)
			err := env.Client.Status().Update(ctx, &cur)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid status rejected: %v", err)
				}
				return
			}
			requireInvalid(t, err, tc.field)
		})
	}
}

// TestLatestAvailableRevisionOnlyIncreases checks the CEL rule OpenShift's operator status
// carries.
func TestLatestAvailableRevisionOnlyIncreases(t *testing.T) {
	ctx := context.Background()
	p := &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "revision"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
	p.Status.LatestAvailableRevision = 5
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("raising latestAvailableRevision: %v", err)
	}
	p.Status.LatestAvailableRevision = 4
	err := env.Client.Status().Update(ctx, p)
	requireInvalid(t, err, "status.latestAvailableRevision")
	if !strings.Contains(err.Error(), "must only increase") {
		t.Errorf("error %q does not say the revision must only increase", err)
	}
}

// TestSchemaDefaults checks the defaults metal3 clients rely on.
func TestSchemaDefaults(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()

	h := builder.BareMetalHost(ns, "defaults").Build()
	if h.Spec.BootMode != "" || h.Spec.AutomatedCleaningMode != "" {
		t.Fatal("the builder sets bootMode or automatedCleaningMode; the test needs them empty")
	}
	if err := env.Client.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	// metal3's schema defaults automatedCleaningMode only; an empty bootMode means UEFI in code, so
	// a stored host shows what its manifest said (no diff for GitOps tools, none when moved).
	if h.Spec.BootMode != "" || h.BootMode() != metal3.UEFI || h.Spec.AutomatedCleaningMode != metal3.CleaningModeMetadata {
		t.Errorf("defaults: bootMode %q (means %q), automatedCleaningMode %q; want empty (UEFI), metadata",
			h.Spec.BootMode, h.BootMode(), h.Spec.AutomatedCleaningMode)
	}

	// A value that is set is kept.
	legacy := builder.BareMetalHost(ns, "legacy").WithBootMode(metal3.Legacy).
		WithAutomatedCleaningMode(metal3.CleaningModeDisabled).Build()
	if err := env.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if legacy.Spec.BootMode != metal3.Legacy || legacy.Spec.AutomatedCleaningMode != metal3.CleaningModeDisabled {
		t.Errorf("explicit values replaced: bootMode %q, automatedCleaningMode %q", legacy.Spec.BootMode, legacy.Spec.AutomatedCleaningMode)
	}

	p := &metal3.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec:       metal3.ProvisioningSpec{PrometheusExporter: &metal3.PrometheusExporter{Enabled: true}},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
	if got := p.Spec.PrometheusExporter.SensorCollectionInterval; got != 60 {
		t.Errorf("sensorCollectionInterval defaulted to %d, want 60", got)
	}
}

func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s rejected", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v; want an Invalid error for %s", err, field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("error %q does not name %s", err, field)
	}
}
