package nmstate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// object walks one YAML mapping: each accessor marks its key as understood, and finish refuses
// the keys nobody asked for, so an unsupported field is named instead of dropped.
type object struct {
	path string
	m    map[string]any
	seen map[string]bool
}

func asObject(path string, v any) (*object, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr(path, "must be a mapping, not %s", describe(v))
	}
	return &object{path: path, m: m, seen: map[string]bool{}}, nil
}

func (o *object) field(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// get returns the value of key (nil, false when absent or null).
func (o *object) get(key string) (any, bool) {
	o.seen[key] = true
	v, ok := o.m[key]
	return v, ok && v != nil
}

func (o *object) str(key string) (string, bool, error) {
	v, ok := o.get(key)
	if !ok {
		return "", false, nil
	}
	switch s := v.(type) {
	case string:
		return s, true, nil
	case json.Number:
		return s.String(), true, nil
	}
	return "", false, fieldErr(o.field(key), "must be a string, not %s", describe(v))
}

func (o *object) boolean(key string) (bool, bool, error) {
	v, ok := o.get(key)
	if !ok {
		return false, false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, false, fieldErr(o.field(key), "must be true or false, not %s", describe(v))
	}
	return b, true, nil
}

// integer accepts a number or a string holding one (nmstate documents quote numbers often).
func (o *object) integer(key string, lo, hi int) (int, bool, error) {
	v, ok := o.get(key)
	if !ok {
		return 0, false, nil
	}
	var s string
	switch n := v.(type) {
	case json.Number:
		s = n.String()
	case string:
		s = n
	default:
		return 0, false, fieldErr(o.field(key), "must be an integer, not %s", describe(v))
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < lo || i > hi {
		return 0, false, fieldErr(o.field(key), "must be an integer from %d to %d, not %q", lo, hi, s)
	}
	return i, true, nil
}

func (o *object) list(key string) ([]any, error) {
	v, ok := o.get(key)
	if !ok {
		return nil, nil
	}
	l, isList := v.([]any)
	if !isList {
		return nil, fieldErr(o.field(key), "must be a list, not %s", describe(v))
	}
	return l, nil
}

func (o *object) object(key string) (*object, bool, error) {
	v, ok := o.get(key)
	if !ok {
		return nil, false, nil
	}
	c, err := asObject(o.field(key), v)
	return c, err == nil, err
}

// strings returns a list of strings.
func (o *object) strings(key string) ([]string, error) {
	l, err := o.list(key)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			return nil, fieldErr(fmt.Sprintf("%s[%d]", o.field(key), i), "must be a string, not %s", describe(v))
		}
		out = append(out, s)
	}
	return out, nil
}

// finish refuses the keys no accessor asked for, naming the first in sorted order and listing
// what is supported at that level.
func (o *object) finish(supported ...string) error {
	var unknown []string
	for k := range o.m {
		if !o.seen[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fieldErr(o.field(unknown[0]), "not supported (supported here: %s)", strings.Join(supported, ", "))
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case json.Number:
		return "the number " + x.String()
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
