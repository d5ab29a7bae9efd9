package recipe

import sro "github.com/metalforge/metalforge/api/sro/v1beta1"

// DependencyFor is what templates see of the dependsOn entry d for one kernel: the dependency's
// namespace and, when d asks for it (imageReference "true"), image, the dependency's driver
// image for that kernel. The SpecialResource controller gives its templates the same values
// (its namespace, and the image its status records for the kernel); the preflight check
// computes them for a kernel no node runs yet.
func DependencyFor(d sro.SpecialResourceDependency, dep *sro.SpecialResource, image string) Dependency {
	out := Dependency{Namespace: dep.TargetNamespace()}
	if UsesImage(d) {
		out.Image = image
	}
	return out
}

// UsesImage says whether templates get the dependency's image (imageReference "true").
func UsesImage(d sro.SpecialResourceDependency) bool { return d.ImageReference == "true" }

// MissingDependency says why dependsOn entry d names no SpecialResource yet, in the
// SpecialResource controller's words: without a recipe nothing creates it; with one, the
// controller of the SpecialResource that depends on it creates it.
func MissingDependency(d sro.SpecialResourceDependency) string {
	if d.Recipe == nil {
		return "does not exist; create it, or give dependsOn a recipe"
	}
	return "does not exist yet; the SpecialResource controller creates it from dependsOn's recipe"
}
