package preflightvalidation

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/kernel"
	"github.com/metalforge/metalforge/internal/sro/pullorbuild"
	"github.com/metalforge/metalforge/internal/sro/recipe"
	"github.com/metalforge/metalforge/internal/sro/validation"
)

// sentinelClusterVersion is a version no cluster runs: a spec that renders otherwise with it
// depends on the cluster version.
const sentinelClusterVersion = "999.999.999"

// upgradeView is what the upgrade uses of a spec rendered for kernel k: the driver image and the
// build that makes it.
func upgradeView(first *sro.SpecialResource, ns, k string) (img, build string, err error) {
	if img, err = image.For(first.Spec.DriverContainer, k); err != nil {
		return "", "", err
	}
	return img, pullorbuild.BuildName(pullorbuild.Input{SR: first, Namespace: ns, Kernel: k, Image: img}), nil
}

// decidesImageOrBuild says whether a spec field takes part in upgradeView for the kernel whose
// image template is imageField (image.Pick): that template (not the other kernel mappings' nor
// the default image, when a mapping serves the kernel), the build inputs, and the version (a build
// argument); not what the driver runs with (runArgs) or loads (modules).
func decidesImageOrBuild(imageField string) func(path string) bool {
	const dc = "spec.driverContainer."
	return func(path string) bool {
		switch {
		case path == "spec.version", path == imageField:
			return true
		case path == dc+"image", strings.HasPrefix(path, dc+"kernelMappings["):
			return false // another kernel's image
		}
		return strings.HasPrefix(path, dc) && !strings.HasPrefix(path, dc+"runArgs[") && !strings.HasPrefix(path, dc+"modules[")
	}
}

// verifier checks every SpecialResource for one kernel, each after the dependencies whose image
// it uses: as the SpecialResource controller renders a SpecialResource only once its
// dependencies are Ready, and then gives its templates their images for the kernel, the check
// renders a SpecialResource only once its dependencies' checks found their images for the
// target kernel, and gives it those. A dependency's own dependencies are its own check's
// business, as they are its own controller's.
type verifier struct {
	r              *Reconciler
	ctx            context.Context
	pv             *sro.PreflightValidation
	kernel         string
	clusterVersion string
	// byName are all SpecialResources, those being deleted too (a dependency being deleted
	// is waited for, not reported missing).
	byName map[string]*sro.SpecialResource
	// done are the checks so far; a nil entry is a check under way (a cycle's guard).
	done map[string]*check
	// nodes are the cluster's nodes, for the operating system the kernel is rendered with.
	nodes []corev1.Node
}

func newVerifier(ctx context.Context, r *Reconciler, pv *sro.PreflightValidation, srs []sro.SpecialResource, nodes []corev1.Node, clusterVersion string) *verifier {
	v := &verifier{r: r, ctx: ctx, pv: pv, kernel: pv.Spec.KernelVersion, clusterVersion: clusterVersion,
		byName: make(map[string]*sro.SpecialResource, len(srs)), done: map[string]*check{}, nodes: nodes}
	for i := range srs {
		v.byName[srs[i].Name] = &srs[i]
	}
	return v
}

// osLabels are the node labels sr's operating-system values are rendered with for the kernel
// (kernel.UpgradeOSLabels among the nodes sr selects). Rendering without any left an Ubuntu or
// Debian cluster's OS variables empty, so a template using them checked (and built) an image the
// SpecialResource controller never asks for once the nodes run the kernel.
func (v *verifier) osLabels(sr *sro.SpecialResource) map[string]string {
	sel := labels.SelectorFromSet(sr.Spec.NodeSelector)
	var selected []kernel.Labelled
	for i := range v.nodes {
		n := &v.nodes[i]
		if sel.Matches(labels.Set(n.Labels)) {
			selected = append(selected, kernel.Labelled{Name: n.Name, Kernel: kernel.OfNode(n), Labels: n.Labels})
		}
	}
	return kernel.UpgradeOSLabels(v.kernel, selected)
}

// check is sr's check, computed once.
func (v *verifier) check(sr *sro.SpecialResource) (*check, error) {
	if c, ok := v.done[sr.Name]; ok {
		if c == nil {
			// validation.Cycle stops every SpecialResource on a cycle before it gets here.
			return &check{name: sr.Name, sr: sr, status: sro.VerificationError, reason: "dependency cycle through " + sr.Name, final: true}, nil
		}
		return c, nil
	}
	v.done[sr.Name] = nil
	c, err := v.verify(sr)
	if err != nil {
		delete(v.done, sr.Name)
		return nil, err
	}
	v.done[sr.Name] = &c
	return &c, nil
}

// verify checks one SpecialResource for the kernel (reads only; builds to start are returned).
func (v *verifier) verify(sr *sro.SpecialResource) (check, error) {
	c := check{name: sr.Name, sr: sr}
	fail := func(st sro.VerificationStatus, reason string) (check, error) {
		c.status, c.reason = st, reason
		return c, nil
	}
	// specError: an Error that follows from the SpecialResources' specs alone (and from their
	// dependencies' checks, done by now): looking again by time cannot change it; a change of a
	// SpecialResource wakes the controller.
	specError := func(reason string) (check, error) {
		c.final = true
		return fail(sro.VerificationError, reason)
	}
	if errs := validation.Spec(sr); len(errs) > 0 {
		return specError("invalid spec: " + errs.ToAggregate().Error())
	}
	if ferr := validation.Cycle(sr, func(n string) (*sro.SpecialResource, bool) { d, ok := v.byName[n]; return d, ok }); ferr != nil {
		return specError(ferr.Error())
	}
	if !image.Used(sr.Spec.DriverContainer) {
		return fail(sro.VerificationTrue, "the SpecialResource uses no driver image")
	}
	ds, err := v.dependencies(sr)
	if err != nil {
		return c, err
	}
	if len(ds.failed) > 0 {
		// Waiting would never end (and would look again every RetryDelay): sr can be verified
		// once the failed dependencies are fixed, which changes them and wakes the controller.
		c.final = ds.final
		return fail(sro.VerificationError, "dependencies failed their check for kernel "+v.kernel+": "+strings.Join(ds.failed, "; "))
	}
	if len(ds.waiting) > 0 {
		// Not an error: the image can be known once the dependencies' images are.
		return fail(sro.VerificationUnknown, "waiting for dependencies: "+strings.Join(ds.waiting, "; "))
	}
	k, ns := v.kernel, sr.TargetNamespace()
	osLabels := v.osLabels(sr)
	values := func(clusterVersion string) recipe.Values {
		return recipe.WithKernel(recipe.Values{Namespace: ns, ClusterVersion: clusterVersion, ClusterVersionMajorMinor: kernel.MajorMinor(clusterVersion),
			PushSecretName: sr.Spec.DriverContainer.PullSecret, SpecialResource: sr, Dependencies: ds.values}, k, osLabels)
	}
	// The cluster version the SpecialResource controller renders the kernel with: the one it kept
	// for a kernel it serves already, else the version when it first sees the kernel (during the
	// upgrade: the upgrade's).
	clusterVersion, pinned := v.clusterVersion, false
	if ks := sr.Status.Kernel(k); ks != nil && ks.ClusterVersion != "" {
		clusterVersion, pinned = ks.ClusterVersion, true
	}
	first, err := recipe.FirstPass(sr, values(clusterVersion))
	if err != nil {
		return specError(err.Error())
	}
	img, build, err := upgradeView(first, ns, k)
	if err != nil {
		return specError(err.Error())
	}
	if !pinned && v.pv.Spec.ClusterVersion == "" {
		// Rendered with the current version, which is not the upgrade's: only a spec whose image
		// and build do not depend on it can be checked.
		// A template of the driver container naming the version depends on it even when the
		// current version and the sentinel render alike (`eq .ClusterVersionMajorMinor "4.16"`);
		// the sentinel catches what the driver container takes from elsewhere (its values).
		_, imageField, err := image.Pick(sr.Spec.DriverContainer, k)
		var named []string
		if err == nil {
			named, err = recipe.FieldsReferencing(sr, decidesImageOrBuild(imageField), "ClusterVersion", "ClusterVersionMajorMinor")
		}
		var other *sro.SpecialResource
		if err == nil {
			other, err = recipe.FirstPass(sr, values(sentinelClusterVersion))
		}
		var otherImg, otherBuild string
		if err == nil {
			otherImg, otherBuild, err = upgradeView(other, ns, k)
		}
		if err != nil || len(named) > 0 || otherImg != img || otherBuild != build {
			c.final = true
			return fail(sro.VerificationUnknown, "spec.clusterVersion: the driver image or build of kernel "+k+
				" depends on the cluster version; set spec.clusterVersion to the version the cluster upgrades to")
		}
	}
	if img == "" {
		return fail(sro.VerificationFalse, "no kernelMappings entry matches the kernel and spec.driverContainer.image is empty")
	}
	c.image = img
	secret, problem, err := pullorbuild.PullSecret(v.ctx, v.r.APIReader, ns, sr.Spec.DriverContainer.PullSecret)
	if err != nil {
		return c, err
	}
	if problem != "" {
		// Missing, or not a docker config: the user's to fix, in the SpecialResource controller's
		// words. Handed to the registry client, a malformed Secret failed the lookup as a registry
		// that cannot be asked (Unknown, pending for ever). Not final: pull Secrets are not
		// watched, and the next look, RetryDelay later, finds a corrected one.
		return fail(sro.VerificationError, problem)
	}
	res, err := pullorbuild.Check(v.ctx, v.r.Registry, v.r.Builder, pullorbuild.Input{SR: first, Namespace: ns, Kernel: k, Image: img, PullSecret: secret})
	if err != nil {
		return c, err
	}
	if res.Invalid != nil {
		// The image as rendered for this kernel is no reference (a kernel with '+', an empty
		// tag): the spec's to fix, as the SpecialResource controller says it.
		return specError(res.Message)
	}
	if res.Refused != nil {
		// The user's to fix, as the SpecialResource controller says it (not Unknown for ever:
		// waiting does not mend refused credentials). Not final: pull Secrets are not watched,
		// and the next look, RetryDelay later, finds a corrected one.
		return fail(sro.VerificationError, res.Message)
	}
	c.start = res.Start
	if c.start != nil {
		if f := v.r.refusals.refusedBefore(v.pv, sr, *c.start); f != nil {
			// Refused at these generations and this pull Secret: not asked again (see writeBuilds).
			c.refuse(*f)
			return c, nil
		}
	}
	if res.Delete != "" {
		c.cleanup = [2]string{ns, res.Delete}
	}
	if res.Unconfirmed {
		// The build pushed, the registry does not show the image yet (a mirror catching up): no
		// image yet, not a failed check, as the SpecialResource controller waits for it too.
		return fail(sro.VerificationFalse, res.Message)
	}
	switch res.State {
	case sro.ImageExists:
		return fail(sro.VerificationTrue, "image "+img+" exists")
	case sro.ImageBuilding:
		return fail(sro.VerificationFalse, res.Message)
	case sro.ImageUnknown:
		return fail(sro.VerificationUnknown, res.Message)
	case sro.ImageMissing:
		return fail(sro.VerificationFalse, res.Message)
	}
	return fail(sro.VerificationError, res.Message)
}

// dependencyState is what sr's check knows of its dependencies.
type dependencyState struct {
	// values are what sr's templates see of its dependencies for the kernel.
	values map[string]recipe.Dependency
	// waiting are the dependencies not known yet: one that does not exist (as the SpecialResource
	// controller reports it), is being deleted, or whose image sr uses and whose own check has not
	// found that image for the kernel yet.
	waiting []string
	// failed are the dependencies whose image sr uses and whose own check is an Error, with its
	// reason; final says every one of those Errors waits for a change (see check.final).
	failed []string
	final  bool
}

// dependencies reads sr's dependencies for the kernel (checking those whose image sr uses).
func (v *verifier) dependencies(sr *sro.SpecialResource) (dependencyState, error) {
	ds := dependencyState{values: map[string]recipe.Dependency{}, final: true}
	for _, d := range sr.Spec.DependsOn {
		dep, ok := v.byName[d.Name]
		switch {
		case !ok:
			ds.waiting = append(ds.waiting, d.Name+" ("+recipe.MissingDependency(d)+")")
			continue
		case !dep.DeletionTimestamp.IsZero():
			ds.waiting = append(ds.waiting, d.Name+" (being deleted)")
			continue
		}
		img := ""
		if recipe.UsesImage(d) {
			dc, err := v.check(dep)
			if err != nil {
				return dependencyState{}, err
			}
			switch dc.status {
			case sro.VerificationTrue:
				img = dc.image
			case sro.VerificationError:
				ds.failed = append(ds.failed, d.Name+" ("+dc.reason+")")
				ds.final = ds.final && dc.final
				continue
			default:
				ds.waiting = append(ds.waiting, fmt.Sprintf("%s (no driver image for kernel %s yet: %s)", d.Name, v.kernel, dc.status))
				continue
			}
		}
		ds.values[d.Name] = recipe.DependencyFor(d, dep, img)
	}
	return ds, nil
}
