package dataimage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/companion"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestDeletionWhileProvisionerUnavailable: a DataImage deleted while the provisioner cannot answer
// about its host's virtual CD (Ironic answering 5xx) says so in status.error, with one
// DataImageError Warning, instead of staying Terminating with nothing saying why; the message goes
// at the next answer (here the host runs its OS by then: the deletion waits for its next power on,
// with nothing to report), and the CD is emptied once the host lets it.
func TestDeletionWhileProvisionerUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	cache := startOperator(t, ns, fix)
	const name = "h"
	h := attachedToAnOffHost(t, ns, name, fix)

	fix.SetUnavailable(true)
	if err := env.Client.Delete(ctx, &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	const want = "detaching: the provisioner cannot answer, retrying: provisioner is not available"
	waitDataImage(t, ns, name, "saying why its deletion waits", func(di *metal3.DataImage) bool {
		return di.Status.Error != nil && di.Status.Error.Message == want
	})
	companiontest.WaitEvent(t, env.Client, ns, "DataImage", name, dataimage.ReasonFailed+": "+want)
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Message == want && e.Action != "Detach" {
			t.Errorf("event %q has action %q, want Detach", e.Message, e.Action)
		}
	}

	companiontest.SetHostStatus(t, env.Client, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.State, st.PoweredOn = metal3.StateProvisioned, true
	})
	waitHostSeen(t, cache, h)
	fix.SetUnavailable(false)
	di := waitDataImage(t, ns, name, "the message gone at the next answer", func(di *metal3.DataImage) bool {
		return di.Status.Error == nil
	})
	if len(di.Finalizers) != 1 {
		t.Fatalf("finalizers %v: the running host's CD must be kept until its next power on", di.Finalizers)
	}

	// Off and kept off: emptied now, and the DataImage goes.
	companiontest.Update(t, env.Client, ns, name, h, func() { h.Spec.Online = false })
	companiontest.SetHostStatus(t, env.Client, h, func(st *metal3.BareMetalHostStatus) { st.PoweredOn = false })
	poll.Until(t, "DataImage gone", func() (bool, string) {
		return !companiontest.Get(t, env.Client, ns, name, &metal3.DataImage{}), "still there"
	})
	if n, _ := fix.Node(ns, name); n.DataImage != "" {
		t.Errorf("the host's CD still holds %q", n.DataImage)
	}
}

// waitHostSeen waits until the controller's cache shows the host's status as h has it.
func waitHostSeen(t *testing.T, cache client.Reader, h *metal3.BareMetalHost) {
	t.Helper()
	poll.Until(t, "host "+h.Name+" seen by the controller", func() (bool, string) {
		got := &metal3.BareMetalHost{}
		if !companiontest.Get(t, cache, h.Namespace, h.Name, got) {
			return false, "not found"
		}
		return got.Status.Provisioning.State == h.Status.Provisioning.State && got.Status.PoweredOn == h.Status.PoweredOn,
			fmt.Sprintf("%s, powered on %v", got.Status.Provisioning.State, got.Status.PoweredOn)
	})
}

// TestSlowDetachFailureIsShown: a detach whose failure shows only after RetryDelay (a BMC slow to
// fail; here the controller looks again after a BusyRetry longer than RetryDelay) is said in
// status.error and an Event before it is tried again; it was tried again at once, which erased the
// failure, so a DataImage whose eject kept failing stayed Terminating with nothing saying why.
func TestSlowDetachFailureIsShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix, func(c *dataimage.Config) { c.RetryDelay, c.BusyRetry = 10*time.Millisecond, 300*time.Millisecond })
	const name = "h"
	attachedToAnOffHost(t, ns, name, fix)

	fix.FailNextFor(ns, name, fixture.OpDetachDataImage, 2)
	if err := env.Client.Delete(ctx, &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	companiontest.WaitEvent(t, env.Client, ns, "DataImage", name, dataimage.ReasonFailed+": detaching: fixture: injected detachdataimage failure")
	poll.Until(t, "DataImage gone once a detach works", func() (bool, string) {
		return !companiontest.Get(t, env.Client, ns, name, &metal3.DataImage{}), "still there"
	})
	if n := fix.Count(ns, name, fixture.OpDetachDataImage); n != 3 {
		t.Errorf("%d detaches, want 3 (two failures, then one that worked)", n)
	}
}

// attachedToAnOffHost creates host name, available and off (its CD is emptied at once when the
// DataImage is deleted), with a DataImage of the same name attached to it and finalized.
func attachedToAnOffHost(t *testing.T, ns, name string, fix *fixture.Fixture) *metal3.BareMetalHost {
	t.Helper()
	ctx := context.Background()
	const url = "http://images.example/config.iso"
	h := companiontest.NewHost(t, env.Client, fix, ns, name)
	companiontest.SetHostStatus(t, env.Client, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.State, st.PoweredOn = metal3.StateAvailable, false
	})
	if _, err := fix.AttachDataImage(ctx, companion.ProvisionerHost(h), url); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.DataImageSpec{URL: url}}); err != nil {
		t.Fatal(err)
	}
	waitDataImage(t, ns, name, "its finalizer", func(di *metal3.DataImage) bool { return len(di.Finalizers) == 1 })
	return h
}
