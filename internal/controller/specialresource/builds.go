package specialresource

import (
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// foundBuild is one of our builds as the builds phase saw it.
type foundBuild struct {
	name, kernel string
	// succeeded is only looked at for the current build of a kernel whose image exists.
	succeeded bool
}

// collectBuilds picks the builds to delete (see buildsToDelete). It runs every reconcile that
// got through the images phase, so that a build is cleaned up whatever reconcile saw it finish:
// the image may have reached the registry before the build said it succeeded, after which the
// images phase no longer asks about it.
func (r *Reconciler) collectBuilds(s *scope) (outcome, bool, error) {
	items, err := r.list(s.ctx, buildKind(r), client.InNamespace(s.in.namespace),
		client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(s.sr.Name)}, client.HasLabels{build.BuildLabel})
	if err != nil {
		return outcome{}, false, err
	}
	var found []foundBuild
	for _, u := range items {
		if !ownedBy(u, s.sr) || !u.GetDeletionTimestamp().IsZero() {
			continue
		}
		b := foundBuild{name: u.GetName(), kernel: u.GetAnnotations()[sro.KernelAnnotation]}
		if ki, ok := s.in.images[b.kernel]; ok && ki.build == b.name && ki.state == sro.ImageExists {
			st, ok, err := r.Builder.Status(s.ctx, s.in.namespace, b.name)
			if err != nil {
				return outcome{}, false, err
			}
			b.succeeded = ok && st.Phase == build.Succeeded
		}
		found = append(found, b)
	}
	if len(found) == 0 {
		return outcome{}, false, nil
	}
	// PreflightValidations build with the same names and labels, for kernels no node runs yet.
	var pvs sro.PreflightValidationList
	if err := r.Client.List(s.ctx, &pvs); err != nil {
		return outcome{}, false, fmt.Errorf("listing PreflightValidations: %w", err)
	}
	preflight := map[string]bool{}
	for _, pv := range pvs.Items {
		preflight[pv.Spec.KernelVersion] = true
	}
	s.fx.deleteBuilds = append(s.fx.deleteBuilds, buildsToDelete(found, s.in.images, preflight)...)
	return outcome{}, false, nil
}

// buildsToDelete: a kernel's current build (named after the inputs of the image the kernel
// needs now) goes once it succeeded and the image is there; a failed one is kept for its logs
// until an input changes. Every other build is superseded (an input changed) or serves a kernel
// no selected node runs: it goes, running or not, unless a PreflightValidation names its kernel
// (the preflight started it for the coming upgrade, and cleans it up itself).
func buildsToDelete(builds []foundBuild, images map[string]kernelImage, preflight map[string]bool) []string {
	var out []string
	for _, b := range builds {
		ki, ok := images[b.kernel]
		del := !preflight[b.kernel]
		if ok && ki.build == b.name {
			del = b.succeeded && ki.state == sro.ImageExists
		}
		if del {
			out = append(out, b.name)
		}
	}
	slices.Sort(out)
	return out
}
