package host

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestPolicyWithoutHost: a HostUpdatePolicy created under a name no host has gets a HostNotFound
// Warning naming metadata.name (its status has no fields); one its host owned is not warned about
// when that host is deleted.
func TestPolicyWithoutHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	policy := func(name string) *metal3.HostUpdatePolicy {
		return &metal3.HostUpdatePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: metal3.HostUpdatePolicySpec{FirmwareSettings: metal3.HostUpdatePolicyOnReboot}}
	}
	warning := func(name string) string {
		return `HostNotFound: metadata.name: no BareMetalHost named "` + name + `" in namespace "` + ns +
			`"; a HostUpdatePolicy applies to the host of the same name`
	}
	create(t, policy("worker-typo"))
	companiontest.WaitEvent(t, env.Client, ns, "HostUpdatePolicy", "worker-typo", warning("worker-typo"))

	createHost(t, newHost(ns, "h").Build())
	create(t, policy("h"))
	waitState(t, ns, "h", metal3.StateProvisioned)
	poll.Until(t, "the policy owned by its host", func() (bool, string) {
		p := &metal3.HostUpdatePolicy{}
		if err := env.Client.Get(context.Background(), objectKey(ns, "h"), p); err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "BareMetalHost" }), ""
	})
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	// A later orphan is warned about: the deleted host's reconciles are done by then.
	create(t, policy("worker-typo-2"))
	companiontest.WaitEvent(t, env.Client, ns, "HostUpdatePolicy", "worker-typo-2", warning("worker-typo-2"))
	if got := companiontest.Events(t, env.Client, ns, "HostUpdatePolicy", "h"); len(got) != 0 {
		t.Errorf("the deleted host's own policy got events %v", got)
	}
}
