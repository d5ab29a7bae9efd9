package ironic

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// patch is a JSON patch for a node, built only from what differs, so that an unchanged node costs
// no request and Ironic's updated_at (and our status) stays still.
type patch []nodes.UpdateOperation

// setField sets a top-level field (e.g. "automated_clean", "deploy_interface"); want nil removes
// it (Ironic then uses its default).
func (pt *patch) setField(field string, want, have any) {
	if want == nil {
		if !isEmpty(have) {
			*pt = append(*pt, nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/" + field})
		}
		return
	}
	if !sameJSON(want, have) {
		*pt = append(*pt, nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/" + field, Value: want})
	}
}

// setKeys sets keys inside a dictionary field (driver_info, instance_info, properties, extra):
// a nil value removes the key, anything else is added or replaced when it differs.
func (pt *patch) setKeys(field string, have map[string]any, want map[string]any) {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := want[k]
		old, exists := have[k]
		path := "/" + field + "/" + escapePointer(k)
		switch {
		case v == nil:
			if exists {
				*pt = append(*pt, nodes.UpdateOperation{Op: nodes.RemoveOp, Path: path})
			}
		case !exists || !sameJSON(v, old):
			*pt = append(*pt, nodes.UpdateOperation{Op: nodes.AddOp, Path: path, Value: v})
		}
	}
}

func (pt patch) opts() nodes.UpdateOpts {
	out := make(nodes.UpdateOpts, len(pt))
	for i, op := range pt {
		out[i] = op
	}
	return out
}

// paths lists what the patch touches, for logs (values may be secrets).
func (pt patch) paths() []string {
	out := make([]string, len(pt))
	for i, op := range pt {
		out[i] = string(op.Op) + " " + op.Path
	}
	return out
}

// sameJSON compares values as they travel: through JSON (numbers become float64, structs maps).
func sameJSON(a, b any) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	switch x := v.(type) {
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
