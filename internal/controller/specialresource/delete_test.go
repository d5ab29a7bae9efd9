package specialresource

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestPodsToWaitFor: deletion waits for pods still running and for terminating pods on Ready
// nodes, not for terminating pods whose node is gone or not Ready.
func TestPodsToWaitFor(t *testing.T) {
	now := metav1.Now()
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		}
		return n
	}
	nodes := map[string]*corev1.Node{"ready": node(corev1.ConditionTrue), "unknown": node(corev1.ConditionUnknown),
		"notready": node(corev1.ConditionFalse), "fresh": node(""), "gone": nil}
	tests := map[string]struct {
		node        string
		terminating bool
		waited      bool
	}{
		"running on a lost node: not deleted yet, waited": {node: "unknown", waited: true},
		"terminating on a Ready node":                     {node: "ready", terminating: true, waited: true},
		"terminating on a node Unknown":                   {node: "unknown", terminating: true},
		"terminating on a node NotReady":                  {node: "notready", terminating: true},
		"terminating on a node without conditions":        {node: "fresh", terminating: true},
		"terminating on a deleted node":                   {node: "gone", terminating: true},
		"terminating, not scheduled":                      {terminating: true, waited: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: tc.node}}
			if tc.terminating {
				p.DeletionTimestamp = &now
			}
			wait, lost := podsToWaitFor([]corev1.Pod{p}, nodes)
			if (len(wait) == 1) != tc.waited || len(wait)+len(lost) != 1 {
				t.Fatalf("wait %v, lost %v; want waited %v", wait, lost, tc.waited)
			}
			if !tc.waited && !strings.Contains(lost["ns/p"], "node "+tc.node) {
				t.Errorf("why %q does not name the node", lost["ns/p"])
			}
		})
	}
}

// TestDeletionWithUnreachableNode: a driver pod on a node whose Ready condition is Unknown
// (powered off) stays Terminating (no kubelet confirms it stopped); deleting the SpecialResource
// does not wait for it, and says so in the status and an event, while it still waits for a pod
// terminating on a Ready node.
func TestDeletionWithUnreachableNode(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.specialResource("kmod")
	if err := env.Client.Create(context.Background(), sr); err != nil {
		t.Fatal(err)
	}
	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runDaemonSet(ds, 1)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	onX := h.driverPod(ds)
	h.setReady("x", corev1.ConditionTrue)
	h.node("lost", kernelX, false)
	h.setReady("lost", corev1.ConditionUnknown)
	owner := h.get(sr.Name)
	// A pod of ours on the lost node (owned by the SpecialResource, so deletion deletes it).
	lostPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sr.Name, Name: "driver-lost",
		Labels:          map[string]string{sro.OwnedLabel: naming.OwnerValue(sr.Name)},
		OwnerReferences: []metav1.OwnerReference{ownerRef(owner)}},
		Spec: corev1.PodSpec{NodeName: h.name("lost"), Containers: []corev1.Container{{Name: "driver", Image: "driver"}}}}
	if err := env.Client.Create(context.Background(), lostPod); err != nil {
		t.Fatal(err)
	}
	// The pod on x stays until its kubelet (the test) confirms it stopped.
	if err := env.Client.Delete(context.Background(), onX); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Delete(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	got := h.waitSR(sr.Name, "waiting for the pod on x only", func(sr *sro.SpecialResource) bool {
		c := conditionMessage(sr, sro.ConditionProgressing)
		return strings.Contains(c, "waiting for 1 driver pods") && strings.Contains(c, sr.Name+"/driver-lost (node "+h.name("lost")+" is not Ready)")
	})
	if !slices.Contains(got.Finalizers, sro.Finalizer) {
		t.Fatalf("let go while a pod on a Ready node was terminating")
	}
	// The kubelet of x confirms its pod stopped.
	if err := env.Client.Delete(context.Background(), onX, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "SpecialResource gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: sr.Name}, &sro.SpecialResource{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	lost := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sr.Name, Name: "driver-lost"}, lost); err != nil || lost.DeletionTimestamp.IsZero() {
		t.Fatalf("the pod on the lost node should still be Terminating: %v", err)
	}
	h.waitEvent(sr.Name, reasonPodsNotWaitedFor, sr.Name+"/driver-lost")
	_ = env.Client.Delete(context.Background(), lost, client.GracePeriodSeconds(0))
}

// setReady sets a node's Ready condition (what the kubelet, or the node lifecycle controller
// for a node that stopped reporting, writes).
func (h *harness) setReady(name string, st corev1.ConditionStatus) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := h.nodeNamed(name)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		return env.Client.Status().Update(context.Background(), n)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// TestWorkloadKindsCoverPodTemplates: every kind whose pods carry our label (podTemplateKinds) is
// deleted first on deletion (workloadKinds): deletion waits for those pods, and would wait for
// ever while their workload keeps them.
func TestWorkloadKindsCoverPodTemplates(t *testing.T) {
	for kind := range podTemplateKinds {
		if !slices.ContainsFunc(workloadKinds, func(gvk schema.GroupVersionKind) bool { return gvk.Kind == kind }) {
			t.Errorf("%s keeps labelled pods but is not deleted first", kind)
		}
	}
}

// TestDeletionWithReplicaSet: a recipe with a ReplicaSet, whose pods carry our label as a
// DaemonSet's do. Deleting the SpecialResource deletes the ReplicaSet first, waits for its pod,
// and lets go once the pod is gone (not stuck waiting for a pod its ReplicaSet keeps).
func TestDeletionWithReplicaSet(t *testing.T) {
	h := start(t)
	ns := h.recipeNamespace()
	h.recipeConfigMap(ns, "helper", map[string]string{"0000-helper.yaml": `apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: '{{.SpecialResource.Name}}-helper'}
spec:
  selector: {matchLabels: {app: helper}}
  template:
    metadata: {labels: {app: helper}}
    spec:
      containers: [{name: helper, image: helper}]
`})
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: ns, Name: "helper"}}
	h.create(sr)
	key := client.ObjectKey{Namespace: sr.Name, Name: sr.Name + "-helper"}
	rs := &appsv1.ReplicaSet{}
	poll.Until(t, "the ReplicaSet", func() (bool, string) {
		err := env.Client.Get(context.Background(), key, rs)
		return err == nil, fmt.Sprint(err)
	})
	// Its pod, as the ReplicaSet controller makes it (envtest runs none).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sr.Name, Name: "helper-0", Labels: rs.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: rs.Spec.Template.Spec}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Delete(context.Background(), h.get(sr.Name)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the ReplicaSet deleted", func() (bool, string) {
		err := env.Client.Get(context.Background(), key, rs)
		return apierrors.IsNotFound(err) || !rs.DeletionTimestamp.IsZero(), describe(h.get(sr.Name))
	})
	h.waitSR(sr.Name, "waiting for the ReplicaSet's pod", func(sr *sro.SpecialResource) bool {
		return strings.Contains(conditionMessage(sr, sro.ConditionProgressing), "waiting for 1 driver pods to stop")
	})
	// The garbage collector removes the pod of the deleted ReplicaSet.
	if err := env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "SpecialResource gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: sr.Name}, &sro.SpecialResource{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
