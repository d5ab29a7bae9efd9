package provisioning

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
)

// covers reports whether existing already has everything desired sets. A field desired leaves at
// its zero value (nil, "", 0, false, empty map or list) is the API server's or another
// controller's to fill: defaults, a Service's cluster IP, annotations others add. A list desired
// sets must have exactly desired's length (apimachinery's DeepDerivative lets existing have more,
// which would keep a container a new spec removed); a map desired sets may have more keys in
// existing.
//
// This is how the operator tells "unchanged" from "changed" without a write: a stored object the
// server defaulted still covers the sparse object the renderer made.
func covers(desired, existing any) bool {
	return coversValue(reflect.ValueOf(desired), reflect.ValueOf(existing))
}

func coversValue(d, e reflect.Value) bool {
	if !d.IsValid() {
		return true
	}
	if !e.IsValid() {
		return d.IsZero()
	}
	switch d.Type() {
	case quantityType:
		dq, eq := d.Interface().(resource.Quantity), e.Interface().(resource.Quantity)
		return dq.IsZero() || dq.Cmp(eq) == 0
	case timeType:
		dt, et := d.Interface().(metav1.Time), e.Interface().(metav1.Time)
		return dt.IsZero() || dt.Equal(&et)
	}
	switch d.Kind() {
	case reflect.Pointer, reflect.Interface:
		if d.IsNil() {
			return true
		}
		if e.IsNil() {
			return false
		}
		return coversValue(d.Elem(), e.Elem())
	case reflect.Slice, reflect.Array:
		if d.Len() == 0 {
			return true
		}
		if d.Len() != e.Len() {
			return false
		}
		for i := range d.Len() {
			if !coversValue(d.Index(i), e.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		for _, k := range d.MapKeys() {
			ev := e.MapIndex(k)
			if !ev.IsValid() || !coversValue(d.MapIndex(k), ev) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range d.NumField() {
			if !d.Type().Field(i).IsExported() {
				continue
			}
			if !coversValue(d.Field(i), e.Field(i)) {
				return false
			}
		}
		return true
	default:
		return d.IsZero() || d.Equal(e)
	}
}
