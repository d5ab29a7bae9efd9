package specialresource

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

const (
	kernelX = "5.14.0-284.30.1.el9_2.x86_64"
	kernelY = "5.14.0-362.8.1.el9_3.x86_64"
)

// TestOneDaemonSetPerKernel: three hardware nodes on kernel X, two on Y and one X node without
// the hardware give exactly two DaemonSets, each pinned to its kernel (through the node label
// the node-kernel controller writes) with that kernel's image; the nodes are labelled with the
// states as the DaemonSets become available, and the SpecialResource ends Ready with every
// hardware node served.
func TestOneDaemonSetPerKernel(t *testing.T) {
	h := start(t)
	for i := range 3 {
		h.node(fmt.Sprint("x", i), kernelX, true)
	}
	h.node("y0", kernelY, true)
	h.node("y1", kernelY, true)
	h.node("other", kernelX, false)
	h.push("vendor/kmod:" + kernelX)
	h.push("vendor/kmod:" + kernelY)
	sr := h.specialResource("kmod")
	h.create(sr)

	dss := h.waitDaemonSets(sr.Name, kernelX, kernelY)
	for k, ds := range dss {
		pod := ds.Spec.Template.Spec
		if pod.NodeSelector[sro.KernelLabel] != naming.LabelValue(k) || pod.NodeSelector["test.metalforge.io/hw"] != h.id {
			t.Errorf("DaemonSet %s node selector %v: want kernel %s and the hardware label", ds.Name, pod.NodeSelector, k)
		}
		if want := h.registry + "/vendor/kmod:" + k; pod.Containers[0].Image != want {
			t.Errorf("DaemonSet %s image %s, want %s", ds.Name, pod.Containers[0].Image, want)
		}
		if ds.Namespace != sr.Name || ds.OwnerReferences[0].Name != sr.Name {
			t.Errorf("DaemonSet %s in %s owned by %v", ds.Name, ds.Namespace, ds.OwnerReferences)
		}
	}
	got := h.waitSR(sr.Name, "waiting on the DaemonSets", isTrue(sro.ConditionProgressing, sro.ReasonHandlingState))
	if got.Status.NodesMatching != 5 || len(got.Status.Kernels) != 2 || got.Status.State != "1000-driver-container.yaml" {
		t.Fatalf("status %s: want 5 matching nodes, 2 kernels, state 1000", describe(got))
	}
	// Every node carries its kernel label; only state 0000 (not waited for) is on the hardware
	// nodes so far.
	for _, n := range h.nodes() {
		hw := n.Labels["test.metalforge.io/hw"] == h.id
		if n.Labels[sro.KernelLabel] == "" {
			t.Errorf("node %s has no kernel label", n.Name)
		}
		if has := n.Labels[naming.StateLabel(sr.Name, "0000")] == "Ready"; has != hw {
			t.Errorf("node %s: state 0000 label %v, want %v", n.Name, has, hw)
		}
		if n.Labels[naming.StateLabel(sr.Name, "1000")] != "" {
			t.Errorf("node %s has the 1000 label before its DaemonSet is available", n.Name)
		}
	}

	h.runDaemonSet(dss[kernelX], 3)
	got = h.waitSR(sr.Name, "X served, Y waiting", func(sr *sro.SpecialResource) bool { return sr.Status.NodesServed == 3 })
	if !isTrue(sro.ConditionProgressing, "")(got) {
		t.Fatalf("Ready with kernel Y not served: %s", describe(got))
	}
	h.runDaemonSet(dss[kernelY], 2)
	got = h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, sro.ReasonSuccess))
	if got.Status.NodesServed != 5 || got.Status.State != "Ready" || got.Status.ReadyGeneration != got.Generation {
		t.Fatalf("Ready: %s, ready generation %d of %d", describe(got), got.Status.ReadyGeneration, got.Generation)
	}
	poll.Until(t, "state 1000 on every hardware node", func() (bool, string) {
		for _, n := range h.nodes() {
			hw := n.Labels["test.metalforge.io/hw"] == h.id
			if (n.Labels[naming.StateLabel(sr.Name, "1000")] == "Ready") != hw {
				return false, fmt.Sprintf("node %s labels %v", n.Name, n.Labels)
			}
		}
		return true, ""
	})
}

// TestKernelChange: a node that reboots into a new kernel moves to a new DaemonSet; the old
// kernel's DaemonSet goes when its last node leaves it, and the node's state labels follow its
// new kernel's readiness.
func TestKernelChange(t *testing.T) {
	h := start(t)
	h.node("a", kernelX, true)
	h.node("b", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	h.push("vendor/kmod:" + kernelY)
	sr := h.specialResource("kmod")
	h.create(sr)
	dss := h.waitDaemonSets(sr.Name, kernelX)
	h.runDaemonSet(dss[kernelX], 2)
	h.waitSR(sr.Name, "Ready on X", isTrue(sro.ConditionReady, ""))

	h.setKernel("a", kernelY)
	dss = h.waitDaemonSets(sr.Name, kernelX, kernelY)
	h.waitSR(sr.Name, "progressing on Y", isTrue(sro.ConditionProgressing, ""))
	poll.Until(t, "node a relabelled: kernel Y, no 1000 label until Y's driver runs", func() (bool, string) {
		n := h.nodeNamed("a")
		return n.Labels[sro.KernelLabel] == kernelY && n.Labels[naming.StateLabel(sr.Name, "1000")] == "", fmt.Sprint(n.Labels)
	})
	if n := h.nodeNamed("b"); n.Labels[naming.StateLabel(sr.Name, "1000")] != "Ready" {
		t.Fatalf("node b, still on X, lost its state label: %v", n.Labels)
	}
	h.runDaemonSet(dss[kernelX], 1)
	h.runDaemonSet(dss[kernelY], 1)
	h.waitSR(sr.Name, "Ready on X and Y", isTrue(sro.ConditionReady, ""))
	remembered := h.reconciler.applied.size()

	h.setKernel("b", kernelY)
	h.waitDaemonSets(sr.Name, kernelY)
	got := h.waitSR(sr.Name, "only Y left", func(sr *sro.SpecialResource) bool {
		return len(sr.Status.Kernels) == 1 && sr.Status.Kernels[0].KernelVersion == kernelY
	})
	if got.Status.NodesMatching != 2 {
		t.Fatalf("status %s", describe(got))
	}
	// The pruned DaemonSet of X is forgotten: the memory of applied objects does not grow with
	// every kernel upgrade for the life of the process.
	if n := h.reconciler.applied.size(); n >= remembered {
		t.Fatalf("%d applied objects remembered after X's DaemonSet was deleted, %d before", n, remembered)
	}
}

// TestUpgradeKeepsARunningKernelsClusterVersion: an image template with the cluster version. An
// upgrade changes the cluster's version long before the nodes reboot: the kernel the nodes still
// run keeps the version it was first rendered with (its image, its DaemonSet, no build), and the
// kernel nodes reboot into during the upgrade gets the new one.
func TestUpgradeKeepsARunningKernelsClusterVersion(t *testing.T) {
	h := start(t)
	h.node("a", kernelX, true)
	h.node("b", kernelX, true)
	h.push("vendor/kmod:4.14-" + kernelX)
	h.push("vendor/kmod:4.15-" + kernelY)
	sr := h.specialResource("kmod")
	sr.Spec.DriverContainer.Image = h.registry + "/vendor/kmod:{{.ClusterVersionMajorMinor}}-{{.KernelFullVersion}}"
	h.create(sr)
	dss := h.waitDaemonSets(sr.Name, kernelX)
	h.runDaemonSet(dss[kernelX], 2)
	got := h.waitSR(sr.Name, "Ready on X", isTrue(sro.ConditionReady, ""))
	if cv := got.Status.Kernels[0].ClusterVersion; cv != "4.14.3" {
		t.Fatalf("kernel X's cluster version %q, want 4.14.3", cv)
	}
	xImage := dss[kernelX].Spec.Template.Spec.Containers[0].Image

	h.setClusterVersion("4.15.1")
	h.setKernel("a", kernelY)
	dss = h.waitDaemonSets(sr.Name, kernelX, kernelY)
	if img := dss[kernelX].Spec.Template.Spec.Containers[0].Image; img != xImage {
		t.Fatalf("kernel X's image changed with the cluster version: %s, was %s", img, xImage)
	}
	if img, want := dss[kernelY].Spec.Template.Spec.Containers[0].Image, h.registry+"/vendor/kmod:4.15-"+kernelY; img != want {
		t.Fatalf("kernel Y's image %s, want %s", img, want)
	}
	h.runDaemonSet(dss[kernelX], 1)
	h.runDaemonSet(dss[kernelY], 1)
	got = h.waitSR(sr.Name, "Ready on X and Y", isTrue(sro.ConditionReady, ""))
	for _, k := range got.Status.Kernels {
		want := map[string]string{kernelX: "4.14.3", kernelY: "4.15.1"}[k.KernelVersion]
		if k.ClusterVersion != want || k.ImageState != sro.ImageExists {
			t.Errorf("kernel %s: cluster version %q, image %s %s; want %s and an existing image", k.KernelVersion, k.ClusterVersion, k.Image, k.ImageState, want)
		}
	}
	if n := h.builder.started(sr.Name); n != 0 {
		t.Fatalf("%d builds started: the images exist", n)
	}
}

func (h *harness) nodes() []corev1.Node {
	h.t.Helper()
	var list corev1.NodeList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{"test.metalforge.io/id": h.id}); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func (h *harness) nodeNamed(name string) *corev1.Node {
	h.t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: h.name(name)}, n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestTaintedNodeNotLabelled: a selected node with a taint the driver DaemonSet does not
// tolerate gets no driver pod; the DaemonSet is ready without it (its pods all run), and the
// SpecialResource is Ready, but only the node with a driver pod is labelled with the driver's
// state (the earlier state, which needs no driver, is on both).
func TestTaintedNodeNotLabelled(t *testing.T) {
	h := start(t)
	h.node("x0", kernelX, true)
	h.node("x1", kernelX, true)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := h.nodeNamed("x1")
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
		return env.Client.Update(context.Background(), n)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.push("vendor/kmod:" + kernelX)
	sr := h.specialResource("kmod")
	h.create(sr)
	h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	l0, l1 := naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "x0 labelled with 1000", func() (bool, string) {
		l := h.nodeNamed("x0").Labels
		return l[l1] == "Ready", fmt.Sprint(l)
	})
	if l := h.nodeNamed("x1").Labels; l[l0] != "Ready" || l[l1] != "" {
		t.Fatalf("tainted node x1 labels %v: want %s and not %s", l, l0, l1)
	}
}
