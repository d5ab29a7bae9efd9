package hostfirmwaresettings

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCRDRefusesIntegersBeyond32Bits: spec.settings values are int32-or-string in the API type; a
// larger integer stored by the API server would fail to decode in every client (the operator's
// cache included: every list of HostFirmwareSettings would fail). The CRD refuses it with a
// message naming the field; a 32-bit integer or a string of any size is taken.
func TestCRDRefusesIntegersBeyond32Bits(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	hfs := func(name string, value any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metal3.io/v1alpha1", "kind": "HostFirmwareSettings",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec":     map[string]any{"settings": map[string]any{"ProcTurboMode": "Enabled", "SomeLimit": value}},
		}}
		return u
	}
	err := env.Client.Create(context.Background(), hfs("too-large", int64(4294967296)))
	if err == nil || !strings.Contains(err.Error(), "spec.settings") || !strings.Contains(err.Error(), "between -2147483648 and 2147483647") {
		t.Errorf("a 33-bit integer: %v, want a refusal naming spec.settings and the range", err)
	}
	for name, v := range map[string]any{"int32": int64(2147483647), "negative": int64(-5), "string": "4294967296"} {
		if err := env.Client.Create(context.Background(), hfs(name, v)); err != nil {
			t.Errorf("%s: %v, want it taken", name, err)
		}
	}
}
