package provisioning

import (
	"context"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/statustext"
)

// syncErrorGrace is how long writes may keep failing, with no successful reconcile between
// them, before the ClusterOperator says so. Conflicts and a cache behind the API server clear
// within seconds; what lasts minutes (an immutable Secret at certificate renewal, a value the
// API server's validation refuses) needs an administrator. Five minutes, as a rollout's.
const syncErrorGrace = 5 * time.Minute

// ReasonSyncError is the event reason when the stack's writes keep failing.
const ReasonSyncError = "SyncError"

// syncFailures remembers since when the writes fail, and what was last reported of them. Only
// the controller's single worker touches it (MaxConcurrentReconciles 1). An operator restart
// starts the clock again.
type syncFailures struct {
	since time.Time
	// reported is the Degraded message the last SyncError event carried. The cached
	// ClusterOperator can lag the status just patched, and the work queue retries a failed
	// write within milliseconds: comparing with the cache alone emitted the event twice.
	reported string
	// lagSince is since when the failures only show the cache behind (cacheLag), one after the
	// other: such failures are reported only once they too last past the grace (a cache that
	// stopped following the API server, a webhook that answers 409).
	lagSince time.Time
}

// succeeded: a reconcile wrote its whole plan.
func (s *syncFailures) succeeded() { *s = syncFailures{} }

// reportable records a failure and says whether it may be reported: any refusal may; failures
// that may only show the cache behind (lag) once they alone have followed one another past the
// grace. A refusal ends such a run.
func (s *syncFailures) reportable(now time.Time, lag bool) bool {
	if !lag {
		s.lagSince = time.Time{}
		return true
	}
	if s.lagSince.IsZero() || now.Before(s.lagSince) {
		s.lagSince = now
	}
	return now.Sub(s.lagSince) >= syncErrorGrace
}

// report says whether a SyncError with this message is news, and remembers it.
func (s *syncFailures) report(message string) bool {
	if s.reported == message {
		return false
	}
	s.reported = message
	return true
}

// failed records a failed write at now and reports whether it has lasted past the grace.
func (s *syncFailures) failed(now time.Time) bool {
	if s.since.IsZero() || now.Before(s.since) {
		s.since = now
	}
	return now.Sub(s.since) >= syncErrorGrace
}

// cacheLag says whether a failed write only shows the informer cache behind the API server (an
// update of an object just deleted, a create of one just made, a stale resourceVersion): the
// retry reads the new state and goes through. It keeps the clock running but is not reported
// until such failures alone last past the grace: after minutes of a real refusal, the Secret an
// administrator deletes to clear it would otherwise be announced as a new SyncError ("not
// found") just before the stack recovers.
func cacheLag(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)
}

// syncErrorState is what the ClusterOperator says of writes failing past the grace: SyncError
// with the refusal, unless the reconcile had decided a Degraded state of its own (an invalid
// configuration, a rollout timed out), whose reason says more and stays, the refusal added to
// its message.
func syncErrorState(decided clusteroperator.State, refusal string, busy string) clusteroperator.State {
	if clusteroperator.Degrades(decided.Reason) {
		decided.Message = statustext.Clean(decided.Said()+"; "+refusal, statustext.ConditionMessageLimit)
		return decided
	}
	return clusteroperator.State{Reason: clusteroperator.ReasonSyncError, Message: refusal, Busy: busy}
}

// writeFailed handles a plan whose writes failed: OpenShift's operator only returns the error, so
// a write the API server refuses for good leaves the ClusterOperator at its last state (often
// Available and not Degraded) while nothing is applied. Past the grace, the ClusterOperator is
// Degraded with SyncError and the error (cleaned: it may quote a Secret's name or an image URL),
// with one Warning event. The error is returned either way: the work queue's backoff retries it,
// and the next successful reconcile writes the decided state over SyncError.
func (r *Reconciler) writeFailed(ctx context.Context, o *observed, p *plan, err error) error {
	lasting := r.failures.failed(o.now)
	reportable := r.failures.reportable(o.now, cacheLag(err))
	if !lasting || !reportable || p.paused || o.co == nil || o.co.ResourceVersion == "" {
		return err
	}
	msg := statustext.Clean("applying the stack: "+err.Error(), statustext.ConditionMessageLimit)
	state := syncErrorState(p.state, msg, o.busy)
	co := o.co
	// Already said by an operator before a restart: the ClusterOperator carries it.
	c := clusteroperator.Condition(co, configv1.OperatorDegraded)
	said := c != nil && c.Reason == state.Reason && c.Message == state.Message
	h := patch.NewHelper(r.Client, co, nil)
	clusteroperator.Apply(co, state, o.release, clusteroperator.RelatedObjects(o.namespace), o.now)
	if _, perr := h.PatchStatus(ctx, co); perr != nil {
		ctrl.LoggerFrom(ctx).Error(perr, "Reporting failed writes on the ClusterOperator")
		return err
	}
	recordConditions(co)
	// Or by this operator since the writes began failing (remembered once the status holds it).
	if news := r.failures.report(state.Message); news && !said {
		var ev events.List
		ev.Warning(ReasonSyncError, "Apply", state.Message)
		if o.prov != nil {
			ev.Emit(r.Recorder, o.prov)
		} else {
			ev.Emit(r.Recorder, co)
		}
	}
	return err
}
