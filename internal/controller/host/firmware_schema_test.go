package host

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// countingReader counts the reads that reach the API server (the host controller's APIReader).
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSettingTypesReadOncePerVersion: a host with a valid setting change pending needs its
// FirmwareSchema's types at every reconcile; the schema (left out of the manager's cache) is read
// from the API server once per resourceVersion, not at every reconcile of every such host.
func TestSettingTypesReadOncePerVersion(t *testing.T) {
	ctx := context.Background()
	schema := &metal3.FirmwareSchema{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "schema-1"},
		Spec: metal3.FirmwareSchemaSpec{Schema: map[string]metal3.SettingSchema{"ProcTurboMode": {AttributeType: "Enumeration"}}}}
	c := fake.NewClientBuilder().WithScheme(fuzzScheme).WithObjects(schema).Build()
	api := &countingReader{Reader: c}
	r := &Reconciler{Client: c, APIReader: api}
	hfs := func(ns string) *metal3.HostFirmwareSettings {
		return &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
			Status: metal3.HostFirmwareSettingsStatus{FirmwareSchema: &metal3.SchemaReference{Namespace: "ns", Name: "schema-1"}}}
	}
	for range 3 {
		got, err := r.settingTypes(ctx, hfs("ns"))
		if err != nil || got["ProcTurboMode"].AttributeType != "Enumeration" {
			t.Fatalf("settingTypes = %v, %v", got, err)
		}
	}
	if api.gets != 1 {
		t.Fatalf("%d reads from the API server for one schema version, want 1", api.gets)
	}

	schema.Spec.Schema["ProcTurboMode"] = metal3.SettingSchema{AttributeType: "String"}
	if err := c.Update(ctx, schema); err != nil {
		t.Fatal(err)
	}
	got, err := r.settingTypes(ctx, hfs("ns"))
	if err != nil || got["ProcTurboMode"].AttributeType != "String" || api.gets != 2 {
		t.Fatalf("after the schema changed: %v, %v, %d reads; want String, read again", got, err, api.gets)
	}

	if err := c.Delete(ctx, schema); err != nil {
		t.Fatal(err)
	}
	if got, err := r.settingTypes(ctx, hfs("ns")); err != nil || got != nil {
		t.Fatalf("a deleted schema: %v, %v; want no types", got, err)
	}
}
