// Package validation checks a SpecialResource the same way for the admission webhook (which
// refuses it) and for the controller (which reports an Errored condition for objects that were
// admitted while no webhook ran): one function, so that both say the same thing, naming the
// field.
package validation

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// moduleName is what a kernel module name may contain: it reaches the entrypoint's shell.
var moduleName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Spec checks a SpecialResource on its own (not its dependencies' graph: see Cycle).
func Spec(sr *sro.SpecialResource) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if ns := sr.Spec.Namespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(spec.Child("namespace"), ns, msg))
		}
	} else {
		// The namespace is then the SpecialResource's name (TargetNamespace), which may have dots
		// or 253 characters: its creation would fail as an internal error, naming no field.
		for _, msg := range validation.IsDNS1123Label(sr.Name) {
			errs = append(errs, field.Invalid(spec.Child("namespace"), "",
				fmt.Sprintf("empty, so the namespace would be the SpecialResource's name %q, which is not a namespace name (%s): set spec.namespace", sr.Name, msg)))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(sr.Spec.NodeSelector, spec.Child("nodeSelector"))...)
	errs = append(errs, recipeRef(sr.Spec.Recipe, spec.Child("recipe"))...)
	errs = append(errs, driverContainer(sr, spec.Child("driverContainer"))...)
	errs = append(errs, dependsOn(sr, spec.Child("dependsOn"))...)
	errs = append(errs, templates(sr)...)
	return errs
}

func recipeRef(r sro.SpecialResourceRecipe, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case r.Name != "" && r.ConfigMap != nil:
		errs = append(errs, field.Invalid(path, "name and configMap", "set one of name and configMap, not both"))
	case r.Name != "" && !slices.Contains(recipe.BuiltinNames(), r.Name):
		errs = append(errs, field.NotSupported(path.Child("name"), r.Name, recipe.BuiltinNames()))
	case r.ConfigMap != nil:
		for _, msg := range validation.IsDNS1123Subdomain(r.ConfigMap.Name) {
			errs = append(errs, field.Invalid(path.Child("configMap", "name"), r.ConfigMap.Name, msg))
		}
		for _, msg := range validation.IsDNS1123Label(r.ConfigMap.Namespace) {
			errs = append(errs, field.Invalid(path.Child("configMap", "namespace"), r.ConfigMap.Namespace, msg))
		}
	}
	return errs
}

func driverContainer(sr *sro.SpecialResource, path *field.Path) field.ErrorList {
	dc := sr.Spec.DriverContainer
	builtin := sr.RecipeOrDefault().Name == sro.DriverContainerRecipe
	var errs field.ErrorList
	if builtin && dc.Image == "" && len(dc.KernelMappings) == 0 {
		errs = append(errs, field.Required(path.Child("image"), "the driver-container recipe needs an image template (or kernelMappings)"))
	}
	if builtin && len(dc.Modules) == 0 {
		errs = append(errs, field.Required(path.Child("modules"), "the driver-container recipe loads these modules; name at least one"))
	}
	for i, m := range dc.Modules {
		if !moduleName.MatchString(m) {
			errs = append(errs, field.Invalid(path.Child("modules").Index(i), m, "a module name has only letters, digits, _ and -"))
		}
	}
	for i, m := range dc.KernelMappings {
		p := path.Child("kernelMappings").Index(i)
		switch {
		case (m.Literal == "") == (m.Regexp == ""):
			errs = append(errs, field.Invalid(p, m.Literal+m.Regexp, "set exactly one of literal and regexp"))
		case m.Regexp != "":
			if _, err := regexp.Compile(m.Regexp); err != nil {
				errs = append(errs, field.Invalid(p.Child("regexp"), m.Regexp, err.Error()))
			}
		}
	}
	if dc.PullSecret != "" {
		for _, msg := range validation.IsDNS1123Subdomain(dc.PullSecret) {
			errs = append(errs, field.Invalid(path.Child("pullSecret"), dc.PullSecret, msg))
		}
	}
	if g := dc.Source.Git; g != nil {
		if u, err := url.Parse(g.URI); err != nil || u.Scheme == "" || u.Host == "" {
			shown := g.URI
			if strings.Contains(shown, "@") {
				// Without a scheme ("oauth2:TOKEN@host/x.git") no cleaner can tell its
				// credentials: the value is not repeated in the answer, status or events.
				shown = "(not shown: it may hold credentials)"
			}
			errs = append(errs, field.Invalid(path.Child("source", "git", "uri"), shown, "want a URL such as https://host/repository.git"))
		}
	}
	seen := sets.New[string]()
	for i, a := range dc.BuildArgs {
		p := path.Child("buildArgs").Index(i).Child("name")
		switch {
		case strings.ContainsAny(a.Name, "= \t\n"):
			errs = append(errs, field.Invalid(p, a.Name, "a build argument name has no '=' or blanks"))
		case seen.Has(a.Name):
			errs = append(errs, field.Duplicate(p, a.Name))
		}
		seen.Insert(a.Name)
	}
	for i, a := range dc.RunArgs {
		for _, msg := range validation.IsEnvVarName(a.Name) {
			errs = append(errs, field.Invalid(path.Child("runArgs").Index(i).Child("name"), a.Name, msg))
		}
	}
	for i, hp := range dc.Artifacts.HostPaths {
		if !strings.HasPrefix(hp.SourcePath, "/") {
			errs = append(errs, field.Invalid(path.Child("artifacts", "hostPaths").Index(i).Child("sourcePath"), hp.SourcePath, "must be an absolute path"))
		}
	}
	return errs
}

func dependsOn(sr *sro.SpecialResource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, d := range sr.Spec.DependsOn {
		p := path.Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(d.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), d.Name, msg))
		}
		if seen.Has(d.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		seen.Insert(d.Name)
		if d.Name == sr.Name {
			errs = append(errs, field.Invalid(p.Child("name"), d.Name, "dependency cycle: "+sr.Name+" → "+sr.Name))
		}
		if d.Recipe != nil {
			errs = append(errs, recipeRef(*d.Recipe, p.Child("recipe"))...)
		}
	}
	return errs
}

// DependencyRecipe refuses a dependsOn recipe a missing dependency cannot be created from. The
// controller creates a missing dependency with nothing but that recipe (a recipe ConfigMap's
// specialresource.yaml gives it a whole spec; a built-in recipe has none): the built-in
// driver-container recipe needs an image and modules, so the webhook would refuse the dependency,
// and the SpecialResource would be stuck retrying its creation. The check is the one the
// dependency's own spec gets, so a built-in recipe that needs nothing but its name passes. It is
// not part of Spec: a dependency the user created (with whatever spec) makes the recipe unused,
// and a SpecialResource valid before must stay valid; the controller asks it when the dependency
// is missing.
func DependencyRecipe(d sro.SpecialResourceDependency, path *field.Path) field.ErrorList {
	if d.Recipe.ConfigMap != nil {
		return nil
	}
	created := &sro.SpecialResource{Spec: sro.SpecialResourceSpec{Recipe: *d.Recipe}}
	needs := driverContainer(created, field.NewPath("spec", "driverContainer"))
	if len(needs) == 0 {
		return nil
	}
	fields := make([]string, 0, len(needs))
	for _, e := range needs {
		fields = append(fields, e.Field)
	}
	name := created.RecipeOrDefault().Name
	if d.Recipe.Name == "" {
		name += " (the default)"
	}
	return field.ErrorList{field.Invalid(path, d.Recipe.Name, fmt.Sprintf(
		"a dependency is created with nothing but its recipe, and the built-in recipe %s needs %s: create SpecialResource %s yourself, "+
			"or give this dependency a recipe ConfigMap (its specialresource.yaml is the spec the dependency is created with)",
		name, strings.Join(fields, ", "), d.Name))}
}

// templates renders every template string of the spec with sample values (first pass), then
// checks that each image renders to a reference with a tag or digest.
func templates(sr *sro.SpecialResource) field.ErrorList {
	var errs field.ErrorList
	rendered, err := recipe.FirstPass(sr, recipe.Sample(sr))
	if err != nil {
		for _, e := range unjoin(err) {
			var fe *recipe.FieldError
			if errors.As(e, &fe) {
				errs = append(errs, field.Invalid(fieldPath(fe.Path), fe.Value, fe.Err.Error()))
			} else {
				errs = append(errs, field.InternalError(field.NewPath("spec"), e))
			}
		}
		return errs
	}
	dc := rendered.Spec.DriverContainer
	check := func(p *field.Path, raw, img string) {
		if img == "" {
			return
		}
		if _, err := image.ParseReference(img); err != nil {
			errs = append(errs, field.Invalid(p, raw, fmt.Sprintf("renders to %q, which is not an image with a tag or digest", img)))
		}
	}
	path := field.NewPath("spec", "driverContainer")
	check(path.Child("image"), sr.Spec.DriverContainer.Image, dc.Image)
	for i, m := range dc.KernelMappings {
		check(path.Child("kernelMappings").Index(i).Child("image"), sr.Spec.DriverContainer.KernelMappings[i].Image, m.Image)
	}
	return errs
}

func unjoin(err error) []error {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		return joined.Unwrap()
	}
	return []error{err}
}

// fieldPath turns "spec.a.b[2].c" into a field.Path (field.Path prints the same text).
func fieldPath(p string) *field.Path {
	var path *field.Path
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if path == nil {
			path = field.NewPath(name)
		} else {
			path = path.Child(name)
		}
		for rest != "" {
			var idx int
			if _, err := fmt.Sscanf(rest, "%d]", &idx); err != nil {
				break
			}
			path = path.Index(idx)
			_, rest, _ = strings.Cut(rest, "[")
		}
	}
	return path
}

// ErrCycle is returned by Cycle.
var ErrCycle = errors.New("dependency cycle")

// Cycle follows dependsOn from sr through the SpecialResources lookup knows (sr itself taken as
// given, not as stored) and returns a field error on the first dependsOn entry that leads back
// to sr, with the cycle in the message: "dependency cycle: a → b → a".
func Cycle(sr *sro.SpecialResource, lookup func(name string) (*sro.SpecialResource, bool)) *field.Error {
	for i, d := range sr.Spec.DependsOn {
		if d.Name == sr.Name {
			continue // reported by Spec
		}
		if path := findPath(d.Name, sr.Name, sr, lookup, sets.New[string]()); path != nil {
			chain := append([]string{sr.Name}, path...)
			return field.Invalid(field.NewPath("spec", "dependsOn").Index(i).Child("name"), d.Name,
				fmt.Sprintf("%v: %s", ErrCycle, strings.Join(chain, " → ")))
		}
	}
	return nil
}

// findPath returns the names from 'from' to 'to' along dependsOn, or nil.
func findPath(from, to string, self *sro.SpecialResource, lookup func(string) (*sro.SpecialResource, bool), visited sets.Set[string]) []string {
	if from == to {
		return []string{to}
	}
	if visited.Has(from) {
		return nil
	}
	visited.Insert(from)
	node, ok := lookup(from)
	if from == self.Name {
		node, ok = self, true
	}
	if !ok {
		return nil
	}
	for _, d := range node.Spec.DependsOn {
		if rest := findPath(d.Name, to, self, lookup, visited); rest != nil {
			return append([]string{from}, rest...)
		}
	}
	return nil
}
