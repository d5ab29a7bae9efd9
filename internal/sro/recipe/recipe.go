// Package recipe loads and renders the manifests of a SpecialResource.
//
// A recipe is an ordered list of states, each a Go template (text/template) of one or more YAML
// manifests, named NNNN-<name>.yaml as the special-resource-operator named them; states run in
// name order. A recipe is either built in (Builtin: "driver-container") or the data of a
// ConfigMap (FromConfigMap), whose optional specialresource.yaml key holds the SpecialResource to
// create when another one depends on it and it does not exist.
//
// Rendering has two passes (the seed's "2 pass templatizing"): FirstPass renders the template
// variables inside the SpecialResource's own strings (a build argument of
// "{{.KernelFullVersion}}", the image template), once per kernel; Render then renders the
// recipe with that rendered SpecialResource among its values. A manifest annotated
// specialresource.openshift.io/kernel-affine: "true" is rendered once per kernel and pinned to
// that kernel's nodes (see affine.go); every other manifest is rendered once.
package recipe

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// State is one state of a recipe: a template of manifests.
type State struct {
	// Name is the file (or ConfigMap key) name, e.g. "1000-driver-container.yaml".
	Name string
	tmpl *template.Template
}

// ID is the state's four-digit prefix ("1000"), used in node labels.
func (s State) ID() string { return s.Name[:4] }

// Recipe is a parsed recipe.
type Recipe struct {
	// Source names where the recipe came from, for messages: "driver-container" or
	// "configmap ns/name".
	Source string
	States []State
	// Default is the SpecialResource to create when another one depends on this recipe and no
	// SpecialResource of that name exists (the ConfigMap's specialresource.yaml); nil if none.
	Default *sro.SpecialResource
}

// DefaultKey is the ConfigMap key holding a recipe's default SpecialResource.
const DefaultKey = "specialresource.yaml"

// stateName is a state's file name: four digits, a dash, a lower-case name, .yaml.
var stateName = regexp.MustCompile(`^[0-9]{4}-[a-z0-9][a-z0-9-]*\.yaml$`)

//go:embed builtin
var builtinFS embed.FS

// BuiltinNames lists the built-in recipes.
func BuiltinNames() []string {
	entries, _ := fs.ReadDir(builtinFS, "builtin")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// ErrUnknownBuiltin is returned for a recipe name that is not built in.
var ErrUnknownBuiltin = errors.New("unknown built-in recipe")

// Builtin parses a built-in recipe.
func Builtin(name string) (*Recipe, error) {
	files, err := BuiltinFiles(name)
	if err != nil {
		return nil, err
	}
	return parse(name, files)
}

// BuiltinFiles are a built-in recipe's files, as a ConfigMap would hold them (a starting point
// for a recipe of one's own).
func BuiltinFiles(name string) (map[string]string, error) {
	dir := path.Join("builtin", name)
	entries, err := fs.ReadDir(builtinFS, dir)
	if err != nil || !slices.Contains(BuiltinNames(), name) {
		return nil, fmt.Errorf("%w %q (built-in recipes: %s)", ErrUnknownBuiltin, name, strings.Join(BuiltinNames(), ", "))
	}
	files := map[string]string{}
	for _, e := range entries {
		data, err := fs.ReadFile(builtinFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading built-in recipe %s: %w", name, err)
		}
		files[e.Name()] = string(data)
	}
	return files, nil
}

// FromConfigMap parses a recipe from a ConfigMap's data; source names the ConfigMap for
// messages. Every key must be a state (NNNN-name.yaml) or specialresource.yaml.
func FromConfigMap(source string, data map[string]string) (*Recipe, error) {
	return parse(source, data)
}

func parse(source string, files map[string]string) (*Recipe, error) {
	r := &Recipe{Source: source}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(files)) {
		if key == DefaultKey {
			sr := &sro.SpecialResource{}
			if err := yaml.UnmarshalStrict([]byte(files[key]), sr); err != nil {
				errs = append(errs, fmt.Errorf("%s: key %s: %w", source, key, err))
			}
			r.Default = sr
			continue
		}
		if !stateName.MatchString(key) {
			errs = append(errs, fmt.Errorf("%s: key %q is not a state: want NNNN-name.yaml (four digits, then a lower-case name) or %s", source, key, DefaultKey))
			continue
		}
		t, err := template.New(key).Option("missingkey=error").Funcs(Funcs()).Parse(files[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		r.States = append(r.States, State{Name: key, tmpl: t})
	}
	if len(r.States) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no states (keys named NNNN-name.yaml)", source))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}
