package imagebuild

import (
	"slices"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// DiscardNamedExcept discards the images of earlier objects of a name and nothing else: the
// image of the UID kept (the object of that name now) and those of other names stay; DiscardNamed
// (the object is gone) discards every image of the name.
func TestDiscardNamedExcept(t *testing.T) {
	e := newEnv(t, nil)
	for _, r := range []Request{
		{UID: "uid-old", Namespace: "ns", Name: "h", Format: metal3.ImageFormatISO},
		{UID: "uid-new", Namespace: "ns", Name: "h", Format: metal3.ImageFormatISO},
		{UID: "uid-other", Namespace: "ns", Name: "other", Format: metal3.ImageFormatISO},
		{UID: "uid-elsewhere", Namespace: "ns2", Name: "h", Format: metal3.ImageFormatISO},
	} {
		e.build(r)
	}
	stored := func() []string {
		var out []string
		for _, s := range e.b.Stored() {
			out = append(out, s.UID)
		}
		slices.Sort(out)
		return out
	}
	must(t, e.b.DiscardNamedExcept("ns", "h", "uid-new"))
	if got, want := stored(), []string{"uid-elsewhere", "uid-new", "uid-other"}; !slices.Equal(got, want) {
		t.Errorf("after DiscardNamedExcept: %v, want %v", got, want)
	}
	must(t, e.b.DiscardNamed("ns", "h"))
	if got, want := stored(), []string{"uid-elsewhere", "uid-other"}; !slices.Equal(got, want) {
		t.Errorf("after DiscardNamed: %v, want %v", got, want)
	}
}
