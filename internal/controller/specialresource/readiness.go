package specialresource

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// readiness says whether an object the recipe waits for (wait annotation) is ready, and if not
// what it waits for. watched: a change of the object wakes the controller (otherwise it polls).
type readiness func(u *unstructured.Unstructured) (ok bool, why string)

// readinessByKind is the special-resource-operator's per-kind readiness (pkg/poll), computed
// from the object instead of by blocking polls. Kinds not listed are ready once they exist.
var readinessByKind = map[string]struct {
	check   readiness
	watched bool
}{
	"DaemonSet":                {daemonSetReady, true},
	"Deployment":               {deploymentReady, true},
	"StatefulSet":              {statefulSetReady, false},
	"Job":                      {jobReady, true},
	"Pod":                      {podReady, false},
	"Namespace":                {namespaceReady, true},
	"CustomResourceDefinition": {crdReady, false},
	"Build":                    {buildReady, true},
}

func convert[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// daemonSetReady: the controller saw the current spec and every scheduled pod is updated and
// available.
func daemonSetReady(u *unstructured.Unstructured) (bool, string) {
	ds, err := convert[appsv1.DaemonSet](u)
	if err != nil {
		return false, err.Error()
	}
	st := ds.Status
	switch {
	case st.ObservedGeneration < ds.Generation:
		return false, "the DaemonSet controller has not seen the current spec"
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d of %d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	case st.NumberAvailable < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d of %d pods available", st.NumberAvailable, st.DesiredNumberScheduled)
	}
	return true, ""
}

func deploymentReady(u *unstructured.Unstructured) (bool, string) {
	d, err := convert[appsv1.Deployment](u)
	if err != nil {
		return false, err.Error()
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
		return false, fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want)
	}
	return true, ""
}

func statefulSetReady(u *unstructured.Unstructured) (bool, string) {
	s, err := convert[appsv1.StatefulSet](u)
	if err != nil {
		return false, err.Error()
	}
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	if s.Status.ObservedGeneration < s.Generation || s.Status.ReadyReplicas < want {
		return false, fmt.Sprintf("%d of %d replicas ready", s.Status.ReadyReplicas, want)
	}
	return true, ""
}

// failedByKind says whether an object the recipe waits for has failed for good (a Job past its
// backoff limit, a Pod that ended in failure, a Build that failed or was cancelled): it will not
// become ready by waiting, so the SpecialResource is Errored naming it, not Progressing for ever.
// Deleting the object makes the plan create it again.
var failedByKind = map[string]func(u *unstructured.Unstructured) string{
	"Job":   jobFailed,
	"Pod":   podFailed,
	"Build": buildFailed,
}

func jobFailed(u *unstructured.Unstructured) string {
	j, err := convert[batchv1.Job](u)
	if err != nil {
		return ""
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return joinReason("failed", c.Reason, c.Message)
		}
	}
	return ""
}

func podFailed(u *unstructured.Unstructured) string {
	p, err := convert[corev1.Pod](u)
	if err != nil || p.Status.Phase != corev1.PodFailed {
		return ""
	}
	return joinReason("failed", p.Status.Reason, p.Status.Message)
}

func buildFailed(u *unstructured.Unstructured) string {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	switch phase {
	case "Failed", "Error", "Cancelled":
		msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
		return joinReason("build "+phase, "", msg)
	}
	return ""
}

// joinReason is "what (reason): message", leaving out what is empty.
func joinReason(what, reason, msg string) string {
	if reason != "" {
		what += " (" + reason + ")"
	}
	if msg != "" {
		what += ": " + msg
	}
	return what
}

func jobReady(u *unstructured.Unstructured) (bool, string) {
	j, err := convert[batchv1.Job](u)
	if err != nil {
		return false, err.Error()
	}
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true, ""
		}
	}
	return false, "not complete"
}

func podReady(u *unstructured.Unstructured) (bool, string) {
	p, err := convert[corev1.Pod](u)
	if err != nil {
		return false, err.Error()
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return true, ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true, ""
		}
	}
	return false, "not ready"
}

func namespaceReady(u *unstructured.Unstructured) (bool, string) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if phase != "" && phase != string(corev1.NamespaceActive) {
		return false, "phase " + phase
	}
	return true, ""
}

func crdReady(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true, ""
		}
	}
	return false, "not established"
}

func buildReady(u *unstructured.Unstructured) (bool, string) {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if phase != "Complete" {
		return false, "build phase " + phase
	}
	return true, ""
}
