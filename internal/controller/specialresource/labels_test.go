package specialresource

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestDriverPodRestartKeepsOtherNodesLabels: two nodes on kernel X, served. The driver pod of x0
// stops being available (its node reboots): the DaemonSet is not ready any more, x0 loses the
// driver's state label, and x1, whose pod still serves, keeps it.
func TestDriverPodRestartKeepsOtherNodesLabels(t *testing.T) {
	h := start(t)
	h.node("x0", kernelX, true)
	h.node("x1", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.specialResource("kmod")
	h.create(sr)
	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runDaemonSet(ds, 2)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	l0, l1 := naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "both nodes labelled", func() (bool, string) {
		return h.nodeNamed("x0").Labels[l1] == "Ready" && h.nodeNamed("x1").Labels[l1] == "Ready", ""
	})

	h.podUnavailable(ds, "x0")
	h.setAvailable(ds, 2, 1)
	// The reconcile that counts one node served wrote the labels before the status.
	h.waitSR(sr.Name, "one node served", func(sr *sro.SpecialResource) bool { return sr.Status.NodesServed == 1 })
	if l := h.nodeNamed("x1").Labels; l[l1] != "Ready" {
		t.Fatalf("x1, whose driver pod is available, lost %s: %v", l1, l)
	}
	poll.Until(t, "x0 without the driver's state label", func() (bool, string) {
		l := h.nodeNamed("x0").Labels
		return l[l1] == "" && l[l0] == "Ready", fmt.Sprint(l)
	})
	if l := h.nodeNamed("x1").Labels; l[l1] != "Ready" {
		t.Fatalf("x1, whose driver pod is available, lost %s: %v", l1, l)
	}
}

// TestNoImageNoDriverLabel: the only kernel's image is being built, so no driver DaemonSet is
// rendered; the recipe's driver is kernel-affine all the same: the node gets state 0000's label
// (the shared objects are there) and not the driver's.
func TestNoImageNoDriverLabel(t *testing.T) {
	h := start(t)
	h.node("y", kernelY, true)
	sr := h.buildable("kmod")
	h.create(sr)
	// The labels are written before the status that says Building.
	h.waitImageState(sr.Name, kernelY, sro.ImageBuilding)
	l0, l1 := naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "state 0000's label", func() (bool, string) {
		l := h.nodeNamed("y").Labels
		return l[l0] == "Ready", fmt.Sprint(l)
	})
	if l := h.nodeNamed("y").Labels; l[l1] != "" {
		t.Fatalf("node y labelled %s with no driver: %v", l1, l)
	}
	if dss := h.daemonSets(sr.Name); len(dss) != 0 {
		t.Fatalf("DaemonSets %v before the image exists", dss)
	}
}

// podUnavailable makes the DaemonSet's pod on the node not Ready (what a reboot does to it).
func (h *harness) podUnavailable(ds appsv1.DaemonSet, node string) {
	h.t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ds.Namespace), client.MatchingLabels(ds.Spec.Selector.MatchLabels)); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != h.name(node) {
			continue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		if err := env.Client.Status().Update(context.Background(), p); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	h.t.Fatalf("no pod of DaemonSet %s on node %s", ds.Name, node)
}

// setAvailable plays the DaemonSet controller counting available of desired pods.
func (h *harness) setAvailable(ds appsv1.DaemonSet, desired, available int32) {
	h.t.Helper()
	poll.Until(h.t, "DaemonSet "+ds.Name+" status written", func() (bool, string) {
		cur := &appsv1.DaemonSet{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&ds), cur); err != nil {
			return false, err.Error()
		}
		cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation, DesiredNumberScheduled: desired, CurrentNumberScheduled: desired,
			NumberReady: available, NumberAvailable: available, NumberUnavailable: desired - available, UpdatedNumberScheduled: desired}
		err := env.Client.Status().Update(context.Background(), cur)
		return err == nil, fmt.Sprint(err)
	})
}
