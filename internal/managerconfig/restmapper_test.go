package managerconfig

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper is a DefaultRESTMapper that counts the RESTMapping questions it answers.
type countingMapper struct {
	*meta.DefaultRESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

var (
	hostKind   = schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "BareMetalHost"}
	schemaKind = schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "FirmwareSchema"}
)

func TestMemoizedRESTMapper(t *testing.T) {
	delegate := &countingMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper([]schema.GroupVersion{hostKind.GroupVersion()})}
	delegate.Add(hostKind, meta.RESTScopeNamespace)
	m := memoize(delegate)

	first, err := m.RESTMapping(hostKind.GroupKind(), hostKind.Version)
	if err != nil || first.Resource.Resource != "baremetalhosts" || first.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("first answer: %+v, %v", first, err)
	}
	first.Resource.Resource = "changed by a caller"
	again, err := m.RESTMapping(hostKind.GroupKind(), hostKind.Version)
	if err != nil || again.Resource.Resource != "baremetalhosts" {
		t.Fatalf("second answer: %+v, %v (a caller's change must not reach the memo)", again, err)
	}
	if delegate.asked != 1 {
		t.Fatalf("the delegate was asked %d times for one kind and version, want 1", delegate.asked)
	}
	if _, err := m.RESTMapping(hostKind.GroupKind()); err != nil || delegate.asked != 2 {
		t.Fatalf("another set of versions is its own question: err %v, asked %d, want 2", err, delegate.asked)
	}

	// What is not found is asked again: a kind served later is found then.
	if _, err := m.RESTMapping(schemaKind.GroupKind(), schemaKind.Version); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown kind: %v, want a no-match error", err)
	}
	delegate.Add(schemaKind, meta.RESTScopeNamespace)
	if got, err := m.RESTMapping(schemaKind.GroupKind(), schemaKind.Version); err != nil || got.Resource.Resource != "firmwareschemas" {
		t.Fatalf("kind served later: %+v, %v", got, err)
	}
	if delegate.asked != 4 {
		t.Fatalf("delegate asked %d times, want 4 (the miss is not remembered)", delegate.asked)
	}
}
