package apitest

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
)

// requireEqual fails the test with a diff when want and got differ semantically (times compare
// by instant, quantities by value).
func requireEqual(t *testing.T, what string, want, got any) {
	t.Helper()
	if !equality.Semantic.DeepEqual(want, got) {
		t.Fatalf("%s changed through the API server (-sent +stored):\n%s", what, diff.Diff(want, got))
	}
}

// requireFullySet fails when any field reachable from v is a zero value: a round trip only proves
// that the schema keeps a field if the example sets it. Types outside the API package (Taint,
// ObjectReference, ...) are checked to be set, not walked.
func requireFullySet(t *testing.T, v any) {
	t.Helper()
	var missing []string
	walkZero(reflect.ValueOf(v), reflect.TypeOf(v).String(), &missing)
	if len(missing) > 0 {
		t.Fatalf("the full example leaves fields unset, so the round trip would not test them:\n  %s",
			strings.Join(missing, "\n  "))
	}
}

const apiPkg = "github.com/metalforge/metalforge/api/metal3/v1alpha1"

func walkZero(v reflect.Value, path string, missing *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			*missing = append(*missing, path)
			return
		}
		// A pointer to a scalar is set even when the scalar is zero (ptr.To(false)).
		if k := v.Elem().Kind(); k == reflect.Struct || k == reflect.Slice || k == reflect.Map {
			walkZero(v.Elem(), path, missing)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != apiPkg {
			if v.IsZero() {
				*missing = append(*missing, path)
			}
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "TypeMeta" || f.Name == "ObjectMeta" {
				continue
			}
			walkZero(v.Field(i), path+"."+f.Name, missing)
		}
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			*missing = append(*missing, path)
			return
		}
		if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				walkZero(v.Index(i), path+"[]", missing)
			}
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			walkZero(iter.Value(), path+"["+iter.Key().String()+"]", missing)
		}
	default:
		if v.IsZero() {
			*missing = append(*missing, path)
		}
	}
}
