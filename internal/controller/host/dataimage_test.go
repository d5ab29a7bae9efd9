package host

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

const dataImageURL = "http://images.example/config.iso"

// startWithDataImages starts the host controller with the DataImage controller beside it, as the
// baremetal-operator runs them.
func startWithDataImages(t *testing.T, ns string, fix *fixture.Fixture, tune ...func(*Config)) *operator {
	t.Helper()
	return startManager(t, env.Config, ns, fix, func(mgr ctrl.Manager) error {
		cfg := dataimage.DefaultConfig()
		cfg.BusyRetry = 100 * time.Millisecond
		return (&dataimage.Reconciler{Provisioner: fix, Config: cfg, SkipNameValidation: true}).SetupWithManager(mgr)
	}, tune...)
}

// provisionedWithDataImage starts the operator, provisions host "h" and creates its DataImage.
func provisionedWithDataImage(t *testing.T, url string, tune ...func(*Config)) (string, *fixture.Fixture, *operator) {
	t.Helper()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithDataImages(t, ns, fix, tune...)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	createDataImage(t, ns, "h", url)
	return ns, fix, op
}

func deleteDataImage(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func waitDataImageGone(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, "DataImage "+name+" gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &metal3.DataImage{})
		return apierrors.IsNotFound(err), "still there"
	})
}

func createDataImage(t *testing.T, ns, name, url string) {
	t.Helper()
	create(t, &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: metal3.DataImageSpec{URL: url}})
}

func waitDataImage(t *testing.T, ns, name, what string, cond func(*metal3.DataImage) bool) *metal3.DataImage {
	t.Helper()
	di := &metal3.DataImage{}
	poll.Until(t, "DataImage "+name+": "+what, func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, di); err != nil {
			return false, err.Error()
		}
		return cond(di), describeDataImage(di)
	})
	return di
}

func describeDataImage(di *metal3.DataImage) string {
	s := "finalizers " + strings.Join(di.Finalizers, ",")
	if di.Status.AttachedImage != nil {
		s += " attached " + di.Status.AttachedImage.URL
	}
	if e := di.Status.Error; e != nil {
		s += " error " + e.Message
	}
	return s
}

// dataImageEvents lists "reason: note" of the Events about a DataImage.
func dataImageEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "DataImage" && e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

func waitDataImageEvent(t *testing.T, ns, name, reason string) string {
	t.Helper()
	var found string
	poll.Until(t, "event "+reason+" on DataImage "+name, func() (bool, string) {
		got := dataImageEvents(t, ns, name)
		for _, e := range got {
			if strings.HasPrefix(e, reason+":") {
				found = e
				return true, ""
			}
		}
		return false, strings.Join(got, " | ")
	})
	return found
}

// waitRebooted waits for a reboot asked with the reboot annotation to be over: the annotation is
// removed once the status records the host off (written in the same reconcile), so a host seen on
// after that is on again.
func waitRebooted(t *testing.T, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	return waitHost(t, ns, name, "powered on again after the reboot", func(h *metal3.BareMetalHost) bool {
		_, reboot := h.Annotations[metal3.RebootAnnotationPrefix]
		return h.Status.PoweredOn && !reboot
	})
}

func nodeDataImage(t *testing.T, fix *fixture.Fixture, ns, name string) string {
	t.Helper()
	n, ok := fix.Node(ns, name)
	if !ok {
		t.Fatalf("no fixture node for %s", name)
	}
	return n.DataImage
}

// A DataImage is attached when its provisioned host is powered on again (a reboot), never to the
// running host; it is owned by the host and carries its finalizer from the start.
func TestDataImageAttachedAtTheNextPowerOn(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithDataImages(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioned)

	createDataImage(t, ns, "h", dataImageURL)
	di := waitDataImage(t, ns, "h", "owned by its host, with the finalizer", func(di *metal3.DataImage) bool {
		return len(di.Finalizers) == 1 && di.Finalizers[0] == metal3.DataImageFinalizer &&
			len(di.OwnerReferences) == 1 && di.OwnerReferences[0].UID == h.UID && di.OwnerReferences[0].Controller != nil
	})
	op.waitSeen(t, ns, "h", h.ResourceVersion, 1)
	if got := nodeDataImage(t, fix, ns, "h"); got != "" {
		t.Fatalf("the running host got the image %q: it must wait for its next power on", got)
	}
	if di.Status.AttachedImage != nil {
		t.Fatalf("status says attached before any power on: %s", describeDataImage(di))
	}

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImage(t, ns, "h", "attached", func(di *metal3.DataImage) bool {
		return di.Status.AttachedImage != nil && di.Status.AttachedImage.URL == dataImageURL && di.Status.Error == nil &&
			di.Status.LastReconciled != nil
	})
	waitRebooted(t, ns, "h")
	if got := nodeDataImage(t, fix, ns, "h"); got != dataImageURL {
		t.Fatalf("node's virtual CD holds %q, want %q", got, dataImageURL)
	}
	waitDataImageEvent(t, ns, "h", dataimage.ReasonAttaching)
	if n := fix.Count(ns, "h", fixture.OpAttachDataImage); n != 1 {
		t.Errorf("%d attaches, want 1", n)
	}
}

// A failed attach is shown in the DataImage's status and as an event, the host stays off while
// it is retried after a backoff, and powers on once the attach succeeds.
func TestDataImageAttachFailureRetried(t *testing.T) {
	// A backoff of a second at least keeps the failure in status long enough to be seen: the
	// retry's attach replaces it (the suite's 10 ms showed it for a few tens of milliseconds).
	ns, fix, _ := provisionedWithDataImage(t, dataImageURL, func(c *Config) { c.Backoff = ExponentialBackoff(time.Second) })
	fix.FailNextFor(ns, "h", fixture.OpAttachDataImage, 2)

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImage(t, ns, "h", "the failure recorded", func(di *metal3.DataImage) bool {
		return di.Status.Error != nil && di.Status.Error.Count >= 1 && strings.Contains(di.Status.Error.Message, "injected") &&
			di.Status.AttachedImage == nil
	})
	if n, _ := fix.Node(ns, "h"); n.PoweredOn {
		t.Fatal("the host was powered on although its DataImage could not be attached")
	}
	note := waitDataImageEvent(t, ns, "h", dataimage.ReasonFailed)
	if !strings.Contains(note, "injected") {
		t.Errorf("failure event %q does not say why", note)
	}
	waitHost(t, ns, "h", "powered on after the retries", func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
	di := waitDataImage(t, ns, "h", "attached, error cleared", func(di *metal3.DataImage) bool {
		return di.Status.AttachedImage != nil && di.Status.Error == nil
	})
	if got := nodeDataImage(t, fix, ns, "h"); got != dataImageURL {
		t.Fatalf("node's virtual CD holds %q: %s", got, describeDataImage(di))
	}
	if n := fix.Count(ns, "h", fixture.OpAttachDataImage); n != 3 {
		t.Errorf("%d attaches, want 3 (two failures, one success)", n)
	}
}

// Deleting a DataImage of a running host waits for the host's next power on, which detaches the
// image and lets the DataImage go.
func TestDataImageDeletedDetachedAtTheNextPowerOn(t *testing.T) {
	ns, fix, op := provisionedWithDataImage(t, dataImageURL)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImage(t, ns, "h", "attached", func(di *metal3.DataImage) bool { return di.Status.AttachedImage != nil })
	h := waitRebooted(t, ns, "h")

	deleteDataImage(t, ns, "h")
	waitDataImage(t, ns, "h", "marked for deletion", func(di *metal3.DataImage) bool { return !di.DeletionTimestamp.IsZero() })
	op.waitSeen(t, ns, "h", h.ResourceVersion, 1)
	if got := nodeDataImage(t, fix, ns, "h"); got != dataImageURL {
		t.Fatalf("the image was taken from the running host (CD %q): it must stay until the next power on", got)
	}

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImageGone(t, ns, "h")
	if got := nodeDataImage(t, fix, ns, "h"); got != "" {
		t.Fatalf("node's virtual CD still holds %q", got)
	}
	waitHost(t, ns, "h", "on again", func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
}

// Deleting the DataImage of a host kept off detaches at once: no operating system runs.
func TestDataImageDeletedWhileTheHostIsOff(t *testing.T) {
	ns, fix, _ := provisionedWithDataImage(t, dataImageURL)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitRebooted(t, ns, "h")
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) { h.Spec.Online = false })
	waitHost(t, ns, "h", "off", func(h *metal3.BareMetalHost) bool { return !h.Status.PoweredOn })

	deleteDataImage(t, ns, "h")
	waitDataImageGone(t, ns, "h")
	if got := nodeDataImage(t, fix, ns, "h"); got != "" {
		t.Fatalf("node's virtual CD still holds %q", got)
	}
	if n, _ := fix.Node(ns, "h"); n.PoweredOn {
		t.Fatal("the host was powered on")
	}
}

// A DataImage with a URL that cannot be attached says so, naming the field, without quoting a
// password, and does not keep its host off; one named after no host says that.
func TestDataImageInvalidInput(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWithDataImages(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)

	createDataImage(t, ns, "h", "ftp://user:s3cret@images.example/config.iso")
	di := waitDataImage(t, ns, "h", "refused", func(di *metal3.DataImage) bool {
		return di.Status.Error != nil && strings.HasPrefix(di.Status.Error.Message, "spec.url:")
	})
	if strings.Contains(describeDataImage(di), "s3cret") {
		t.Fatalf("status quotes the password: %s", describeDataImage(di))
	}
	note := waitDataImageEvent(t, ns, "h", dataimage.ReasonInvalid)
	if !strings.Contains(note, "spec.url") || strings.Contains(note, "s3cret") {
		t.Errorf("event %q", note)
	}
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitHost(t, ns, "h", "rebooted without the image", func(h *metal3.BareMetalHost) bool {
		_, reboot := h.Annotations[metal3.RebootAnnotationPrefix]
		return h.Status.PoweredOn && !reboot
	})
	if got := nodeDataImage(t, fix, ns, "h"); got != "" {
		t.Fatalf("an invalid DataImage was attached: %q", got)
	}

	// Fixed: the message goes.
	update(t, &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(di *metal3.DataImage) { di.Spec.URL = dataImageURL })
	waitDataImage(t, ns, "h", "message cleared", func(di *metal3.DataImage) bool { return di.Status.Error == nil })

	createDataImage(t, ns, "nobody", dataImageURL)
	waitDataImage(t, ns, "nobody", "no host said", func(di *metal3.DataImage) bool {
		return di.Status.Error != nil && strings.HasPrefix(di.Status.Error.Message, "metadata.name:") && len(di.Finalizers) == 0
	})
}

// A deleted host lets its DataImage go: nothing attaches or detaches it any more (the garbage
// collector, absent here, deletes it with its owner; its finalizer must not hold it).
func TestDataImageOfADeletedHost(t *testing.T) {
	ns, _, _ := provisionedWithDataImage(t, dataImageURL)
	waitDataImage(t, ns, "h", "finalizer on", func(di *metal3.DataImage) bool { return len(di.Finalizers) == 1 })
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	waitDataImage(t, ns, "h", "finalizer off", func(di *metal3.DataImage) bool { return len(di.Finalizers) == 0 })
	deleteDataImage(t, ns, "h")
	waitDataImageGone(t, ns, "h")
}

// A provisioner that cannot attach data images to a host (an old Ironic, a driver without virtual
// media) does not keep the host off: the DataImage says why, and its deletion is not held.
func TestDataImageUnsupported(t *testing.T) {
	ns, fix, _ := provisionedWithDataImage(t, dataImageURL)
	fix.SetDataImageUnsupported(true)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitRebooted(t, ns, "h")
	waitDataImage(t, ns, "h", "the reason said", func(di *metal3.DataImage) bool {
		return di.Status.Error != nil && strings.Contains(di.Status.Error.Message, "no virtual media") && di.Status.AttachedImage == nil
	})
	waitDataImageEvent(t, ns, "h", dataimage.ReasonFailed)
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) { h.Spec.Online = false })
	waitHost(t, ns, "h", "off", func(h *metal3.BareMetalHost) bool { return !h.Status.PoweredOn })
	deleteDataImage(t, ns, "h")
	waitDataImageGone(t, ns, "h")
}

// A DataImage deleted while the provisioner may boot its agent from the host's virtual CD
// (provisioning here) does not eject it: the deletion waits for a state where nothing boots.
func TestDataImageDeletedWhileTheAgentMayBoot(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpProvision: time.Hour}})
	op := startWithDataImages(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioning)
	// The agent's ISO in the CD, as Ironic's virtual media boot puts it there.
	const agentISO = "http://ironic.example/redfish/boot-node.iso"
	if _, err := fix.AttachDataImage(context.Background(), provisionerHostOf(h), agentISO); err != nil {
		t.Fatal(err)
	}
	createDataImage(t, ns, "h", dataImageURL)
	waitDataImage(t, ns, "h", "adopted", func(di *metal3.DataImage) bool { return len(di.Finalizers) == 1 })
	deleteDataImage(t, ns, "h")
	di := waitDataImage(t, ns, "h", "marked for deletion", func(di *metal3.DataImage) bool { return !di.DeletionTimestamp.IsZero() })
	op.waitSeen(t, ns, "h", h.ResourceVersion, 1)
	if got := nodeDataImage(t, fix, ns, "h"); got != agentISO {
		t.Fatalf("the CD holds %q while the host provisions: the agent's ISO was ejected (%s)", got, describeDataImage(di))
	}
	fix.SetLatency(fixture.OpProvision, 0)
	waitState(t, ns, "h", metal3.StateProvisioned)
	// Provisioned and on: the CD now only matters at the next power on, which empties it.
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImageGone(t, ns, "h")
	if got := nodeDataImage(t, fix, ns, "h"); got != "" {
		t.Fatalf("the CD still holds %q", got)
	}
}

// provisionerHostOf is the provisioner's view of h, for calling the fixture directly.
func provisionerHostOf(h *metal3.BareMetalHost) provisioner.Host {
	return provisioner.Host{Namespace: h.Namespace, Name: h.Name, NodeID: h.Status.Provisioning.ID}
}

// A host whose power off is disabled is never powered on: its reboot in place is when its
// DataImage is attached, and when a deleted one is detached.
func TestDataImageOfAHostThatIsNeverOff(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWithDataImages(t, ns, fix)
	createHost(t, newHost(ns, "h").WithDisablePowerOff().Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	createDataImage(t, ns, "h", dataImageURL)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImage(t, ns, "h", "attached", func(di *metal3.DataImage) bool { return di.Status.AttachedImage != nil })
	waitHost(t, ns, "h", "rebooted", func(h *metal3.BareMetalHost) bool {
		_, pending := h.Annotations[metal3.RebootAnnotationPrefix]
		return !pending
	})
	if got := nodeDataImage(t, fix, ns, "h"); got != dataImageURL {
		t.Fatalf("CD holds %q", got)
	}
	if n := fix.Count(ns, "h", fixture.OpReboot); n != 1 {
		t.Errorf("%d reboots, want 1", n)
	}
	deleteDataImage(t, ns, "h")
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitDataImageGone(t, ns, "h")
	if got := nodeDataImage(t, fix, ns, "h"); got != "" {
		t.Fatalf("CD still holds %q", got)
	}
}
