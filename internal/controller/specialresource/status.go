package specialresource

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/sro/message"
)

// conditionTypes are set together: the outcome's is True, the others False with its reason.
var conditionTypes = []string{sro.ConditionReady, sro.ConditionProgressing, sro.ConditionErrored}

// setStatus writes the outcome and what the phases saw into the status (in memory; the driver
// writes it once). It returns the outcome's condition when that condition was not True before
// with the same reason, or is Errored with another message (a new problem: "ConfigMap not found",
// then a template error in it, are both RecipeFailure), else "": a transition worth an event.
func setStatus(sr *sro.SpecialResource, s *scope, out outcome, now metav1.Time) string {
	st := &sr.Status
	transition := ""
	if prev := conditions.Get(st.Conditions, out.condition); !conditions.IsTrue(st.Conditions, out.condition) || prev.Reason != out.reason ||
		(out.condition == sro.ConditionErrored && prev.Message != out.message) {
		transition = out.condition
	}
	for _, t := range conditionTypes {
		c := conditions.False(t, out.reason, "")
		if t == out.condition {
			c = conditions.True(t, out.reason, out.message)
		}
		conditions.Set(&st.Conditions, c, sr.Generation, now.Time)
	}
	st.ObservedGeneration = sr.Generation
	if out.condition == sro.ConditionReady {
		st.ReadyGeneration = sr.Generation
	}
	st.State = out.state
	// During a move, the namespace left stays named until nothing of ours is left in it: the
	// record a restarted operator finishes the move from (move.go).
	if s.in.namespace != "" && (st.Namespace == "" || namespaceSettled(s)) {
		st.Namespace = s.in.namespace
	}
	if s.in.kernels == nil && s.plan == nil {
		// The reconcile stopped before it looked at the nodes: keep what is known.
		return transition
	}
	st.NodesMatching = int32(s.in.nodesMatching)
	st.Kernels = kernelStatuses(sr, s)
	var served int32
	for _, k := range st.Kernels {
		served += k.Available
	}
	st.NodesServed = served
	return transition
}

// kernelStatuses is one entry per kernel among the selected nodes; what a phase that did not
// run would have said is kept from the previous status.
func kernelStatuses(sr *sro.SpecialResource, s *scope) []sro.KernelStatus {
	out := make([]sro.KernelStatus, 0, len(s.in.kernels))
	for _, g := range s.in.kernels {
		ks := sro.KernelStatus{KernelVersion: g.kernel, Nodes: int32(len(g.nodes)), ClusterVersion: kernelClusterVersion(s, g.kernel)}
		if prev := kernelStatus(sr, g.kernel); prev != nil {
			ks.Image, ks.ImageState, ks.DaemonSet, ks.Available = prev.Image, prev.ImageState, prev.DaemonSet, prev.Available
		}
		if ki, ok := s.in.images[g.kernel]; ok {
			ks.Image, ks.ImageState, ks.Message = ki.image, ki.state, ki.message
		}
		if why, ok := s.fx.refusedBuilds[g.kernel]; ok {
			// No build runs: the spec must change before one can.
			ks.ImageState, ks.Message = sro.ImageMissing, message.Sanitize(why)
		}
		if s.plan != nil {
			if ds := s.plan.driverDaemonSets[g.kernel]; ds != nil {
				ks.DaemonSet = ds.GetName()
				avail, _, _ := unstructured.NestedInt64(ds.Object, "status", "numberAvailable")
				ks.Available = int32(avail)
			} else if _, rendered := s.in.images[g.kernel]; s.plan.hold || (rendered && ks.ImageState == sro.ImageExists) {
				ks.DaemonSet, ks.Available = "", 0
			}
			if msg := s.plan.perKernel[g.kernel]; msg != "" && ks.Message == "" {
				ks.Message = message.Sanitize(msg)
			}
		}
		out = append(out, ks)
	}
	return out
}

// namespaceSettled: spec.namespace is the only namespace in use, as far as this reconcile saw:
// it looked for namespaces a move left (the objects phase) and found none, or the move removed
// everything of ours from them.
func namespaceSettled(s *scope) bool {
	return s.in.oldNamespacesRead && (len(s.in.oldNamespaces) == 0 || s.fx.movedOut)
}
