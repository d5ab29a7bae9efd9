package recipe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// FieldError is a template problem in a SpecialResource field; Path is the field
// ("spec.driverContainer.buildArgs[0].value").
type FieldError struct {
	Path string
	// Value is the template as written.
	Value string
	Err   error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// notTemplates are spec fields that are never templates: kernel mappings match kernels as given.
var notTemplates = regexp.MustCompile(`^spec\.driverContainer\.kernelMappings\[\d+\]\.(literal|regexp)$`)

// FirstPass renders the template variables in the strings of sr's spec with vals (the first of
// the two passes) and returns the rendered copy; sr is not changed. Errors are FieldErrors,
// joined.
func FirstPass(sr *sro.SpecialResource, vals Values) (*sro.SpecialResource, error) {
	if vals.SpecialResource == nil {
		vals.SpecialResource = sr
	}
	tree, err := specTree(sr)
	if err != nil {
		return nil, err
	}
	var errs []error
	tree = walkStrings(tree, "spec", func(path, s string) string {
		if !strings.Contains(s, "{{") || notTemplates.MatchString(path) {
			return s
		}
		out, err := renderString(path, s, vals)
		if err != nil {
			errs = append(errs, &FieldError{Path: path, Value: s, Err: err})
			return s
		}
		return out
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := sr.DeepCopy()
	raw, err := json.Marshal(tree)
	if err == nil {
		out.Spec = sro.SpecialResourceSpec{}
		err = json.Unmarshal(raw, &out.Spec)
	}
	if err != nil {
		return nil, fmt.Errorf("rebuilding spec of %s: %w", sr.Name, err)
	}
	return out, nil
}

// RenderString renders one template string (an image template, say) with vals.
func RenderString(name, s string, vals Values) (string, error) {
	return renderString(name, s, vals)
}

func renderString(name, s string, vals Values) (string, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(Funcs()).Parse(s)
	if err != nil {
		return "", fmt.Errorf("bad template: %w", err)
	}
	var b strings.Builder
	if err := t.Execute(&b, vals); err != nil {
		return "", fmt.Errorf("rendering template: %w", err)
	}
	return b.String(), nil
}

// specTree is sr's spec as a decoded JSON tree, for walkStrings.
func specTree(sr *sro.SpecialResource) (any, error) {
	raw, err := json.Marshal(sr.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding spec of %s: %w", sr.Name, err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, fmt.Errorf("decoding spec of %s: %w", sr.Name, err)
	}
	return tree, nil
}

// walkStrings replaces every string leaf of a decoded JSON tree by fn(path, leaf).
func walkStrings(v any, path string, fn func(path, s string) string) any {
	switch t := v.(type) {
	case string:
		return fn(path, t)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			t[k] = walkStrings(t[k], path+"."+k, fn)
		}
	case []any:
		for i := range t {
			t[i] = walkStrings(t[i], fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
	return v
}

// Object is one rendered manifest.
type Object struct {
	// State is the recipe state it belongs to.
	State string
	// Kernel is the kernel it serves when kernel-affine, else "".
	Kernel string
	// Wait: the state is done only when this object is ready (sro.WaitAnnotation).
	Wait bool
	// WaitForLogs is the sro.WaitForLogsAnnotation regexp ("" if none).
	WaitForLogs *regexp.Regexp
	Obj         *unstructured.Unstructured
}

// RenderedState is the manifests of one state.
type RenderedState struct {
	Name    string
	Objects []Object
}

// ID is the state's four-digit prefix.
func (s RenderedState) ID() string { return s.Name[:4] }

// Render renders every state of r: the manifests that are not kernel-affine once with base, and
// the kernel-affine ones once per entry of perKernel (kernel → values), made affine (see
// MakeAffine). Errors name the state and, for kernel-affine ones, the kernel.
func Render(r *Recipe, base Values, perKernel map[string]Values) ([]RenderedState, error) {
	kernels := slices.Sorted(maps.Keys(perKernel))
	out := make([]RenderedState, 0, len(r.States))
	for _, st := range r.States {
		rs := RenderedState{Name: st.Name}
		objs, err := renderState(st, base, "")
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if !o.affine() {
				rs.Objects = append(rs.Objects, o)
			}
		}
		for _, k := range kernels {
			objs, err := renderState(st, perKernel[k], k)
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				if o.affine() {
					MakeAffine(o.Obj, k)
					o.Kernel = k
					rs.Objects = append(rs.Objects, o)
				}
			}
		}
		out = append(out, rs)
	}
	return out, nil
}

func (o Object) affine() bool {
	return o.Obj.GetAnnotations()[sro.KernelAffineAnnotation] == "true"
}

// renderState executes a state's template and decodes its YAML documents.
func renderState(st State, vals Values, kernel string) ([]Object, error) {
	where := "state " + st.Name
	if kernel != "" {
		where += " (kernel " + kernel + ")"
	}
	var buf bytes.Buffer
	if err := st.tmpl.Execute(&buf, vals); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(&buf))
	var objs []Object
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading manifest %d: %w", where, i+1, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: manifest %d is not valid YAML: %w", where, i+1, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue // empty or comments only
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%s: manifest %d: %w", where, i+1, err)
		}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: manifest %d (%s) has no metadata.name", where, i+1, u.GetKind())
		}
		o := Object{State: st.Name, Obj: u, Wait: u.GetAnnotations()[sro.WaitAnnotation] == "true"}
		if expr := u.GetAnnotations()[sro.WaitForLogsAnnotation]; expr != "" {
			re, err := regexp.Compile(expr)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: annotation %s: %w", where, u.GetKind(), u.GetName(), sro.WaitForLogsAnnotation, err)
			}
			o.WaitForLogs, o.Wait = re, true
		}
		objs = append(objs, o)
	}
	return objs, nil
}
