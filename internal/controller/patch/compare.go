package patch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusDiff is the JSON merge patch from before's status to after's: the fields that changed,
// with null for the removed ones.
func statusDiff(before, after client.Object) (map[string]any, error) {
	b, err := statusJSON(before)
	if err != nil {
		return nil, err
	}
	a, err := statusJSON(after)
	if err != nil {
		return nil, err
	}
	diff, err := mergeDiff(b, a)
	if err != nil {
		return nil, fmt.Errorf("diffing status of %s: %w", client.ObjectKeyFromObject(after), err)
	}
	return diff, nil
}

// mergeDiff is the JSON merge patch from the JSON object b to a, decoded.
func mergeDiff(b, a []byte) (map[string]any, error) {
	raw, err := jsonpatch.CreateMergePatch(b, a)
	if err != nil {
		return nil, err
	}
	diff := map[string]any{}
	if err := json.Unmarshal(raw, &diff); err != nil {
		return nil, fmt.Errorf("decoding a merge patch: %w", err)
	}
	return diff, nil
}

// statusComparison is compareStatus's verdict.
type statusComparison int

const (
	statusUndecided statusComparison = iota // the JSON diff must tell
	statusSame
	statusDiffers
)

// compareStatus tells whether before's and after's statuses would encode alike, leaving out the
// ignored top-level fields (JSON names), without the JSON diff when it can: most reconciles
// change nothing, most of the others change a field or two, and the diff (two encodings, a
// merge patch, a decoding) was the largest share of what the controllers allocated. Field by
// field: deeply equal values encode alike; for a field that differs, its own encoding decides,
// an omitempty field that is empty counting as left out. An inlined struct (whose fields an
// ignored name could be among) or an omitzero field leaves it undecided.
func compareStatus(before, after client.Object, ignore []string) statusComparison {
	b, a := statusField(before), statusField(after)
	switch {
	case !b.IsValid() && !a.IsValid():
		return statusSame
	case !b.IsValid() || !a.IsValid() || b.Type() != a.Type() || b.Kind() != reflect.Struct:
		return statusUndecided
	}
	t := b.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || slices.Contains(ignore, name) || (name == "" && slices.Contains(ignore, f.Name)) {
			continue // not encoded, or ignored
		}
		bf, af := b.Field(i), a.Field(i)
		if reflect.DeepEqual(bf.Interface(), af.Interface()) {
			continue
		}
		if f.Anonymous || strings.Contains(opts, "omitzero") {
			return statusUndecided
		}
		if alike, ok := encodeAlike(bf, af, strings.Contains(opts, "omitempty")); !ok {
			return statusUndecided
		} else if !alike {
			return statusDiffers
		}
	}
	return statusSame
}

// encodeAlike tells whether two values of a status field encode alike (ok false when one does
// not encode).
func encodeAlike(b, a reflect.Value, omitEmpty bool) (alike, ok bool) {
	if omitEmpty && (emptyJSON(b) || emptyJSON(a)) {
		return emptyJSON(b) && emptyJSON(a), true
	}
	bj, berr := json.Marshal(b.Interface())
	aj, aerr := json.Marshal(a.Interface())
	if berr != nil || aerr != nil {
		return false, false
	}
	return bytes.Equal(bj, aj), true
}

// emptyJSON is encoding/json's notion of empty, which omitempty leaves out.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// statusField is the object's Status field (invalid when it has none).
func statusField(obj client.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return v.FieldByName("Status")
}

// statusJSON is the object's status as JSON ({} when it has none).
func statusJSON(obj client.Object) ([]byte, error) {
	f := statusField(obj)
	if !f.IsValid() {
		return []byte("{}"), nil
	}
	data, err := json.Marshal(f.Interface())
	if err != nil {
		return nil, fmt.Errorf("encoding status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return data, nil
}
