package preflightvalidation

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/message"
)

// reasonBuildStarted is the event of a build the check started (the SpecialResource
// controller's name for it).
const reasonBuildStarted = "BuildStarted"

// writeBuilds starts the builds the checks asked for and deletes the finished ones. A build the
// builder refuses (build.Refused: OpenShift builds cannot mount spec.driverContainer.artifacts
// hostPaths or claims; Job builds need a kubernetes.io/dockerconfigjson pull Secret) turns its
// check into an Error, reported as the SpecialResource controller reports it (RecipeFailure, the
// builder's words), with one Warning event, and is not tried again until the SpecialResource or
// the PreflightValidation changes, or (for the pull Secret) the Secret's format does. A build the
// API server refuses to create (its namespace missing or terminating, a quota, an admission
// policy) is that check's Error, looked at again after RetryDelay, rather than a failure of the
// whole reconcile: the other checks go on, and the status says why. A failed deletion of a
// finished build is returned, after the other checks are done.
func (r *Reconciler) writeBuilds(ctx context.Context, pv *sro.PreflightValidation, checks []*check, evs *events.List) error {
	var cleanupErr error
	prev := map[string]sro.SpecialResourceVerification{}
	for _, s := range pv.Status.SRStatuses {
		prev[s.Name] = s
	}
	after := map[string]refusal{}
	for _, c := range checks {
		if c.start != nil {
			err := r.Builder.Start(ctx, *c.start)
			switch {
			case build.Refused(err):
				c.refuse(refusal{pvGeneration: pv.Generation, srUID: c.sr.UID, srGeneration: c.sr.Generation, build: c.start.Name,
					pushSecretKey: c.start.PushSecretKey, final: !errors.Is(err, build.ErrDockerConfigJSONNeeded),
					reason: fmt.Sprintf("cannot start %s %s: %v", r.Builder.Kind(), c.start.Name, err)})
			case err != nil:
				c.status, c.reason, c.final, c.start = sro.VerificationError,
					fmt.Sprintf("cannot start %s %s in namespace %s: %v", r.Builder.Kind(), c.start.Name, c.start.Namespace, err), false, nil
			default:
				evs.NormalAbout(c.sr, reasonBuildStarted, "Build", fmt.Sprintf("Building %s of SpecialResource %s for kernel %s (%s %s)",
					c.image, c.name, pv.Spec.KernelVersion, r.Builder.Kind(), c.start.Name))
			}
		}
		if c.refused != nil {
			after[c.name] = *c.refused
			if p, ok := prev[c.name]; !ok || p.VerificationStatus != c.status || p.StatusReason != message.Sanitize(c.reason) {
				*evs = append(*evs, events.Event{Type: corev1.EventTypeWarning, Reason: sro.ReasonRecipeFailure, Action: "Build", Related: c.sr,
					Note: message.Sanitize("SpecialResource " + c.name + ": " + c.reason)})
			}
		}
		if c.cleanup[1] != "" {
			if err := r.Builder.Delete(ctx, c.cleanup[0], c.cleanup[1]); err != nil && cleanupErr == nil {
				cleanupErr = err
			}
		}
	}
	r.refusals.set(pv.Name, after)
	return cleanupErr
}

// refuse makes the check the Error of a build the builder refused.
func (c *check) refuse(f refusal) {
	c.status, c.reason, c.final, c.start, c.refused = sro.VerificationError, f.reason, f.final, nil, &f
}

// retry says whether to look again after RetryDelay: some check is neither True nor an Error
// that waits for a change (builds and SpecialResources wake the controller sooner).
func retry(checks []*check) bool {
	for _, c := range checks {
		if c.status != sro.VerificationTrue && !c.final {
			return true
		}
	}
	return false
}

// refusal is a build the builder refused, for the generations (and the pull Secret's format) it
// was refused at.
type refusal struct {
	pvGeneration, srGeneration int64
	srUID                      types.UID
	build                      string
	// pushSecretKey is the key the pull Secret had (build.Request.PushSecretKey).
	pushSecretKey string
	reason        string
	// final: only a change of the SpecialResource or the PreflightValidation can mend it. A
	// refused pull Secret is mended by the Secret, which is not watched: looked at again by time.
	final bool
}

// refusedBefore is the refusal of req for sr at these generations and this pull Secret format,
// or nil.
func (f *refusals) refusedBefore(pv *sro.PreflightValidation, sr *sro.SpecialResource, req build.Request) *refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.m[pv.Name][sr.Name]
	if !ok || old.pvGeneration != pv.Generation || old.srUID != sr.UID || old.srGeneration != sr.Generation ||
		old.build != req.Name || old.pushSecretKey != req.PushSecretKey {
		return nil
	}
	return &old
}

// refusals are the refused builds of each PreflightValidation (by SpecialResource name). Kept in
// memory: after a restart the builder is asked once more, and the status, unchanged, emits no
// second event.
type refusals struct {
	mu sync.Mutex
	m  map[string]map[string]refusal
}

func (f *refusals) set(pv string, r map[string]refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]map[string]refusal{}
	}
	if len(r) == 0 {
		delete(f.m, pv)
		return
	}
	f.m[pv] = r
}

func (f *refusals) forget(pv string) { f.set(pv, nil) }
