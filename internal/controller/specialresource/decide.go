package specialresource

import (
	"fmt"
	"maps"
	"slices"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// planPhase runs the pure plan over what the earlier phases read, and decides the outcome.
func (r *Reconciler) planPhase(s *scope) (outcome, bool, error) {
	s.plan = plan(r.planInput(s))
	r.skipInFlightLabels(s)
	return decide(s.sr, s.in, s.plan, s.cfg), true, nil
}

// planInput gathers what the phases read for plan (and holdPlan).
func (r *Reconciler) planInput(s *scope) planInput {
	in := planInput{srName: s.sr.Name, states: s.in.rendered, affine: s.in.affine, unserved: s.in.unserved, observed: s.in.observed, stale: s.in.stale, logs: s.in.logs,
		kernels: map[string]kernelGroup{}, present: map[string]bool{}, failed: map[string]bool{}, owned: s.in.owned, nodes: s.in.allNodes,
		selected: map[string]string{}, driverPods: s.in.driverPods, heldDrivers: s.in.heldDrivers}
	for _, g := range s.in.kernels {
		in.present[g.kernel] = true
		for _, n := range g.nodes {
			in.selected[n] = g.kernel
		}
		ki := s.in.images[g.kernel]
		if ki.state == sro.ImageExists {
			in.kernels[g.kernel] = g
		}
		if _, refused := s.fx.refusedBuilds[g.kernel]; refused || ki.failed() {
			in.failed[g.kernel] = true
		}
	}
	return in
}

// skipInFlightLabels drops the label changes whose very patch is on its way to the cache.
func (r *Reconciler) skipInFlightLabels(s *scope) {
	for _, n := range s.in.allNodes {
		if c, ok := s.plan.nodeLabels[n.name]; ok && r.nodeWrites.inFlight(s.sr.Name, n.name, n.resourceVersion, c) {
			delete(s.plan.nodeLabels, n.name)
		}
	}
}

// decide turns the images and the plan into the reconcile's outcome: Errored when an object's
// turn came while the cluster does not serve its kind, the pull Secret keeps a kernel's image
// from being looked up, or a kernel has no image and cannot get one (its build failed, or there
// is nothing to build from) — the other kernels are still served, so an Errored SpecialResource
// whose other kernels wait for what wakes nobody (pod logs, say) looks again as soon as a
// Progressing one would —, Progressing while the registry cannot be asked or does not show a
// built image yet (looked at again after RetryDelay), a state waits or a build runs, Ready when
// every state is ready for every kernel.
func decide(sr *sro.SpecialResource, in inputs, p *planResult, cfg *Config) outcome {
	var failed, unseen, missing, building, unknown []string
	for _, k := range slices.Sorted(maps.Keys(in.images)) {
		switch in.images[k].state {
		case sro.ImageBuildFailed:
			if in.images[k].unconfirmed {
				// The build succeeded; the registry does not show the image yet (a mirror
				// catching up, say). Not a failure to report: nothing wakes the controller when
				// the image appears (the build is done), so it looks again after RetryDelay.
				unseen = append(unseen, k)
				continue
			}
			failed = append(failed, k)
		case sro.ImageMissing:
			missing = append(missing, k)
		case sro.ImageBuilding:
			building = append(building, k)
		case sro.ImageUnknown:
			unknown = append(unknown, k)
		}
	}
	after := cfg.Resync
	if p.poll || p.labelsBehind {
		after = cfg.WaitPoll
	}
	// An Errored resource polls only while another kernel's state really waits for what wakes
	// nobody: p.poll alone also marks ready objects of kinds nobody watches, and polling for them
	// would read the registry (and the pull Secret) for the failed kernel every few seconds for
	// as long as the failure lasts.
	erroredAfter := cfg.Resync
	if (p.poll && p.waiting != "") || p.labelsBehind {
		erroredAfter = cfg.WaitPoll
	}
	if len(unseen) > 0 {
		// Another kernel's failure is reported, but the unseen image is still looked for.
		after, erroredAfter = min(after, cfg.RetryDelay), min(erroredAfter, cfg.RetryDelay)
	}
	switch {
	case p.unservedKind != "":
		// Every state before the object is ready and still the cluster does not serve its kind,
		// which no CRD of the recipe up to its state defines: a typo, or a CRD someone else must
		// install. Looked at again every RetryDelay (the cluster's kinds are not watched).
		return errored(sro.ReasonRecipeFailure, message.Sanitize(recipeSource(in.recipe)+p.unservedKind), min(erroredAfter, cfg.RetryDelay))
	case p.failedObject != "":
		// Waiting cannot make it ready; the object is watched or polled, so its deletion (or
		// success) is seen.
		return errored(sro.ReasonRecipeFailure, message.Sanitize(recipeSource(in.recipe)+p.failedObject), erroredAfter)
	case in.imageProblem != "":
		// The user's to fix; looked at again every RetryDelay (Secrets are not watched: an invalid
		// image reference, which only a watched change mends, is looked at as often, cheaply), or
		// sooner while the other kernels' states wait for what wakes nobody.
		return errored(sro.ReasonInvalidSpec, in.imageProblem, min(erroredAfter, cfg.RetryDelay))
	case len(failed) > 0:
		return errored(sro.ReasonBuildFailed, fmt.Sprintf("build of the driver image failed for kernel %s: %s", message.List(failed), in.images[failed[0]].message), erroredAfter)
	case len(missing) > 0:
		return errored(sro.ReasonImageMissing, fmt.Sprintf("no driver image for kernel %s: %s", message.List(missing), in.images[missing[0]].message), erroredAfter)
	}
	switch {
	case len(unknown) > 0:
		return progressing(sro.ReasonWaitingForImage, fmt.Sprintf("kernel %s: %s", message.List(unknown), in.images[unknown[0]].message), "", min(after, cfg.RetryDelay))
	case len(unseen) > 0:
		return progressing(sro.ReasonWaitingForImage, fmt.Sprintf("kernel %s: %s", message.List(unseen), in.images[unseen[0]].message), "", after)
	case p.waiting != "":
		return progressing(sro.ReasonHandlingState, "state "+p.waitingState+": "+p.waiting, p.waitingState, after)
	case len(building) > 0:
		return progressing(sro.ReasonWaitingForImage, fmt.Sprintf("building the driver image for kernel %s", message.List(building)), "", after)
	}
	out := ready()
	out.after = cfg.Resync
	if p.labelsBehind {
		out.after = cfg.WaitPoll // the last labels follow the pods into the cache
	}
	if len(in.kernels) == 0 {
		out.message = "no selected node reports a kernel; nothing to serve"
	}
	if in.nodesNoKernel > 0 {
		out.message += fmt.Sprintf(" (%d selected nodes report no kernel)", in.nodesNoKernel)
	}
	return out
}

// recipeSource prefixes a recipe's problem with where the recipe came from ("ConfigMap ns/r: "),
// "" for the built-in one.
func recipeSource(r *recipe.Recipe) string {
	if r == nil {
		return ""
	}
	return r.Source + ": "
}
