package apitest

import (
	"context"
	"reflect"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// strict makes the API server reject unknown fields instead of silently dropping them, so a field
// missing from a CRD schema fails the test.
var strict = client.FieldValidation("Strict")

// TestEveryKindRoundTrips writes a full example of every kind (spec on create, status through the
// status subresource) and reads it back unchanged.
func TestEveryKindRoundTrips(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		obj       client.Object
		hasStatus bool
	}{
		{fullBareMetalHost(ns), true},
		{fullHardwareData(ns), false},
		{fullPreprovisioningImage(ns), true},
		{fullHostFirmwareSettings(ns), true},
		{fullFirmwareSchema(ns), false},
		{fullHostFirmwareComponents(ns), true},
		{fullHostUpdatePolicy(ns), false},
		{fullDataImage(ns), true},
		{fullBMCEventSubscription(ns), true},
		{fullProvisioning("roundtrip"), true},
	} {
		kind := reflect.TypeOf(tc.obj).Elem().Name()
		t.Run(kind, func(t *testing.T) {
			requireFullySet(t, tc.obj)
			ctx := context.Background()
			sent := tc.obj.DeepCopyObject().(client.Object)

			if err := env.Client.Create(ctx, tc.obj, strict); err != nil {
				t.Fatalf("creating %s: %v", kind, err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tc.obj) })
			got := newEmpty(tc.obj)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), got); err != nil {
				t.Fatalf("getting %s: %v", kind, err)
			}
			requireEqual(t, kind+" spec", part(sent, "Spec"), part(got, "Spec"))
			if !tc.hasStatus {
				return
			}

			setPart(got, "Status", part(sent, "Status"))
			if err := env.Client.Status().Update(ctx, got, strict); err != nil {
				t.Fatalf("updating %s status: %v", kind, err)
			}
			again := newEmpty(tc.obj)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), again); err != nil {
				t.Fatalf("getting %s: %v", kind, err)
			}
			requireEqual(t, kind+" status", part(sent, "Status"), part(again, "Status"))
			requireEqual(t, kind+" spec after a status update", part(sent, "Spec"), part(again, "Spec"))
		})
	}
}

func newEmpty(obj client.Object) client.Object {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

func part(obj client.Object, name string) any {
	return reflect.ValueOf(obj).Elem().FieldByName(name).Interface()
}

func setPart(obj client.Object, name string, value any) {
	reflect.ValueOf(obj).Elem().FieldByName(name).Set(reflect.ValueOf(value))
}
