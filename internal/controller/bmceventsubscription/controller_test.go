package bmceventsubscription

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

const (
	destination = "https://events.example.com/metal3/"
	token       = "Bearer s3cret-token"
)

func start(t *testing.T, ns string, fix *fixture.Fixture) {
	t.Helper()
	startWith(t, ns, fix)
}

// startWith starts the controller with p and returns the manager's cache; tune, when given,
// changes the tests' delays.
func startWith(t *testing.T, ns string, p provisioner.EventSubscriber, tune ...func(*Config)) client.Reader {
	t.Helper()
	cfg := Config{Resync: 300 * time.Millisecond, RetryDelay: 200 * time.Millisecond, BusyRetry: 100 * time.Millisecond, Concurrency: 2}
	for _, f := range tune {
		f(&cfg)
	}
	return companiontest.StartManager(t, env, env.Config, ns, host.CacheViews(), func(ctx context.Context, mgr ctrl.Manager) error {
		return (&Reconciler{Provisioner: p, Config: cfg, SkipNameValidation: true}).SetupWithManager(ctx, mgr)
	})
}

func newSubscription(ns, name, hostName string, headers bool) *metal3.BMCEventSubscription {
	sub := &metal3.BMCEventSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.BMCEventSubscriptionSpec{HostName: hostName, Destination: destination, Context: "rack-7"}}
	if headers {
		sub.Spec.HTTPHeadersRef = &corev1.SecretReference{Name: "headers", Namespace: ns}
	}
	return sub
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

func waitSub(t *testing.T, ns, name, what string, cond func(*metal3.BMCEventSubscription) bool) *metal3.BMCEventSubscription {
	t.Helper()
	sub := &metal3.BMCEventSubscription{}
	companiontest.Wait(t, env.Client, ns, name, what, sub, func() bool { return cond(sub) })
	return sub
}

func waitSubGone(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, "subscription "+name+" gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &metal3.BMCEventSubscription{})
		return apierrors.IsNotFound(err), "still there"
	})
}

func deleteSub(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), &metal3.BMCEventSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// noSecretValue fails when the header's value shows in the subscription's status or Events.
func noSecretValue(t *testing.T, ns, name string) {
	t.Helper()
	sub := &metal3.BMCEventSubscription{}
	companiontest.Get(t, env.Client, ns, name, sub)
	all := sub.Status.Error + strings.Join(companiontest.Events(t, env.Client, ns, "BMCEventSubscription", name), "\n")
	if strings.Contains(all, "s3cret") {
		t.Fatalf("a header value reached status or events: %s", all)
	}
}

// A subscription is created on the host's BMC with its destination, context and the headers of
// its Secret; one the BMC lost (a reset) is created again; deleting it removes it from the BMC.
func TestSubscriptionLifecycle(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, builder.DataSecret(ns, "headers", "Authorization", token), newSubscription(ns, "s", "h", true))

	sub := waitSub(t, ns, "s", "created", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })
	if len(sub.Finalizers) != 1 || sub.Finalizers[0] != metal3.BMCEventSubscriptionFinalizer || sub.Status.Error != "" {
		t.Errorf("subscription %+v: want the finalizer and no error", sub)
	}
	got := fix.Subscriptions(ns, "h")[sub.Status.SubscriptionID]
	if got.Destination != destination || got.Context != "rack-7" || got.HTTPHeaders["Authorization"] != token {
		t.Errorf("on the BMC: %s; want the spec's destination, context and the Secret's header", got)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonCreated)

	first := sub.Status.SubscriptionID
	fix.DropSubscriptions(ns, "h")
	waitSub(t, ns, "s", "created again", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.SubscriptionID != first
	})
	if subs := fix.Subscriptions(ns, "h"); len(subs) != 1 {
		t.Errorf("BMC has %d subscriptions after the re-creation, want 1", len(subs))
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonLost)

	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
	if subs := fix.Subscriptions(ns, "h"); len(subs) != 0 {
		t.Errorf("BMC still has %v", subs)
	}
	noSecretValue(t, ns, "s")
}

// A changed headers Secret (a rotated token) reaches the BMC: the subscription is deleted and
// created again with the new headers (Redfish cannot change them), once; the Secret is labelled
// for the operator's cache on its first read, and the headers' version is recorded on the
// subscription.
func TestSubscriptionHeadersRotated(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, builder.DataSecret(ns, "headers", "Authorization", token), newSubscription(ns, "s", "h", true))

	secret := &corev1.Secret{}
	sub := waitSub(t, ns, "s", "created, the headers' version recorded", func(s *metal3.BMCEventSubscription) bool {
		companiontest.Get(t, env.Client, ns, "headers", secret)
		return s.Status.SubscriptionID != "" && s.Annotations[metal3.HTTPHeadersVersionAnnotation] == headersVersion(secret, map[string]string{"Authorization": token})
	})
	if secret.Labels[metal3.EnvironmentLabel] != metal3.EnvironmentLabelValue {
		t.Errorf("headers Secret labels %v, want the cache label", secret.Labels)
	}
	first := sub.Status.SubscriptionID

	const rotated = "Bearer s3cret-rotated"
	secret = &corev1.Secret{}
	companiontest.Update(t, env.Client, ns, "headers", secret, func() { secret.Data["Authorization"] = []byte(rotated) })
	sub = waitSub(t, ns, "s", "created again with the new headers", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.SubscriptionID != first &&
			s.Annotations[metal3.HTTPHeadersVersionAnnotation] == headersVersion(secret, map[string]string{"Authorization": rotated})
	})
	subs := fix.Subscriptions(ns, "h")
	if len(subs) != 1 || subs[sub.Status.SubscriptionID].HTTPHeaders["Authorization"] != rotated {
		t.Errorf("on the BMC: %v; want only the new subscription, with the rotated token", subs)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonHeadersChanged)
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 2 {
		t.Errorf("%d creations, want 2 (the first, the renewal)", n)
	}
	noSecretValue(t, ns, "s")
}

// Problems name the field and clear once fixed: a missing headers Secret, a host that does not
// exist yet, a BMC that refuses the subscription (retried).
func TestSubscriptionProblems(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)

	create(t, newSubscription(ns, "early", "later", false))
	sub := waitSub(t, ns, "early", "no host said", func(s *metal3.BMCEventSubscription) bool {
		return strings.HasPrefix(s.Status.Error, `spec.hostName: no BareMetalHost "later"`)
	})
	if len(sub.Finalizers) != 0 || sub.Status.SubscriptionID != "" {
		t.Errorf("subscription without a host: %+v", sub)
	}
	companiontest.NewHost(t, env.Client, fix, ns, "later")
	waitSub(t, ns, "early", "created once the host exists", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.Error == ""
	})

	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, newSubscription(ns, "s", "h", true))
	waitSub(t, ns, "s", "the missing Secret named", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.Error == `spec.httpHeadersRef: Secret "headers" not found in namespace "`+ns+`"`
	})
	fix.FailNextFor(ns, "h", fixture.OpCreateSubscription, 1)
	create(t, builder.DataSecret(ns, "headers", "Authorization", token))
	// Said in an event: in status it lasts only until the retry, RetryDelay (200 ms) later.
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonFailed+": creating the subscription on the BMC: fixture: injected")
	waitSub(t, ns, "s", "created on the retry", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.Error == ""
	})
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 2 {
		t.Errorf("%d creations, want 2 (one refused)", n)
	}
	noSecretValue(t, ns, "s")
}

// A subscription whose host is detached cannot be removed from its BMC: its deletion is not held,
// and a Warning says the subscription may remain.
func TestSubscriptionOfADetachedHost(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	cache := startWith(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "created", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })
	for range 10 {
		cur := &metal3.BareMetalHost{}
		companiontest.Get(t, env.Client, ns, "h", cur)
		cur.Annotations = map[string]string{metal3.DetachedAnnotation: ""}
		if err := env.Client.Update(context.Background(), cur); err == nil {
			break
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	// The controller reads the host from the manager's cache: deleted before the annotation
	// reaches it, the subscription would be deleted from a BMC the test says is detached.
	poll.Until(t, "the detached host in the controller's cache", func() (bool, string) {
		cur := &metal3.BareMetalHost{}
		if err := cache.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "h"}, cur); err != nil {
			return false, err.Error()
		}
		_, detached := cur.Annotations[metal3.DetachedAnnotation]
		return detached, fmt.Sprint(cur.Annotations)
	})
	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonLeft)
	if subs := fix.Subscriptions(ns, "h"); len(subs) != 1 {
		t.Errorf("BMC has %v: a detached host's BMC is not reached", subs)
	}
}

// A host whose BMC cannot take subscriptions (IPMI) gets a message once, no retries, and the
// subscription can be deleted.
func TestSubscriptionOfAnIPMIHost(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	h := builder.BareMetalHost(ns, "h").WithBMC("ipmi://192.0.2.5", "bmc-h").WithOnline(true).Build()
	create(t, h)
	companiontest.Register(t, env.Client, fix, h)
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "refused for good", func(s *metal3.BMCEventSubscription) bool {
		return strings.Contains(s.Status.Error, "IPMI") && s.Status.SubscriptionID == ""
	})
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 0 {
		t.Errorf("%d creations reached the BMC", n)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", "IPMI")
	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
}

// A subscription already on the BMC with the same destination and context (a create whose answer
// was lost) is taken over instead of doubled; one another BMCEventSubscription records is not.
func TestSubscriptionTakenOver(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	lost := fix.AddSubscription(ns, "h", provisioner.EventSubscription{Destination: destination, Context: "rack-7"})
	create(t, newSubscription(ns, "first", "h", false))
	waitSub(t, ns, "first", "the lost create taken over", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID == lost })
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 0 {
		t.Errorf("%d creations: the lost one was doubled", n)
	}
	// A second object with the same destination and context gets a subscription of its own.
	create(t, newSubscription(ns, "second", "h", false))
	second := waitSub(t, ns, "second", "created", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })
	if second.Status.SubscriptionID == lost || len(fix.Subscriptions(ns, "h")) != 2 {
		t.Errorf("second subscription %q, BMC has %v: want one each", second.Status.SubscriptionID, fix.Subscriptions(ns, "h"))
	}
}

// A subscription with headers found on the BMC is replaced, not taken over: its headers cannot be
// read back and may be a token the Secret no longer holds (one left by a deleted object).
func TestSubscriptionWithHeadersNotTakenOver(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	left := fix.AddSubscription(ns, "h", provisioner.EventSubscription{Destination: destination, Context: "rack-7",
		HTTPHeaders: map[string]string{"Authorization": "Bearer an-old-token"}})
	create(t, builder.DataSecret(ns, "headers", "Authorization", token), newSubscription(ns, "s", "h", true))
	sub := waitSub(t, ns, "s", "created", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })
	subs := fix.Subscriptions(ns, "h")
	if sub.Status.SubscriptionID == left || len(subs) != 1 || subs[sub.Status.SubscriptionID].HTTPHeaders["Authorization"] != token {
		t.Errorf("subscription %q, on the BMC %v: want only a new one, with the Secret's token", sub.Status.SubscriptionID, subs)
	}
	noSecretValue(t, ns, "s")
}

// A BMC reset that numbers subscriptions anew can give one object's old id to another client's
// subscription: the hourly check sees that the id now has another destination, takes its own
// subscription for lost and creates it again, and deleting the object leaves the other client's
// alone. Kept, the id would have hidden the loss (no error, no events) and the deletion would have
// removed the other's. A host with a single BMCEventSubscription, as most have.
func TestSubscriptionIdReusedAfterABMCReset(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, newSubscription(ns, "a", "h", false))
	a := waitSub(t, ns, "a", "created", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })

	// The reset: another client subscribes and gets a's old id.
	reused := a.Status.SubscriptionID
	other := provisioner.EventSubscription{Destination: "https://other.example.com/events", Context: "rack-7"}
	fix.DropSubscriptions(ns, "h")
	fix.PutSubscription(ns, "h", reused, other)

	a = waitSub(t, ns, "a", "its lost subscription created again", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.SubscriptionID != reused
	})
	subs := fix.Subscriptions(ns, "h")
	if len(subs) != 2 || subs[a.Status.SubscriptionID].Destination != destination || subs[reused].Destination != other.Destination {
		t.Errorf("on the BMC: %v; want a's subscription under a new id and the other one under %s", subs, reused)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "a", ReasonLost)

	deleteSub(t, ns, "a")
	waitSubGone(t, ns, "a")
	if subs := fix.Subscriptions(ns, "h"); len(subs) != 1 || subs[reused].Destination != other.Destination {
		t.Errorf("on the BMC after a's deletion: %v; want only the other client's, under %s", subs, reused)
	}
}

// A subscription deleted after a BMC reset gave its id to another client's, before the hourly
// check saw it: the other client's subscription is not deleted.
func TestSubscriptionDeletedAfterItsIdWasReused(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWith(t, ns, fix, func(c *Config) { c.Resync = time.Hour })
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, newSubscription(ns, "a", "h", false))
	a := waitSub(t, ns, "a", "created", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })

	reused := a.Status.SubscriptionID
	other := provisioner.EventSubscription{Destination: "https://other.example.com/events", Context: "rack-7"}
	fix.DropSubscriptions(ns, "h")
	fix.PutSubscription(ns, "h", reused, other)
	deleteSub(t, ns, "a")
	waitSubGone(t, ns, "a")
	if subs := fix.Subscriptions(ns, "h"); len(subs) != 1 || subs[reused].Destination != other.Destination {
		t.Errorf("on the BMC after a's deletion: %v; want the other client's subscription under %s kept", subs, reused)
	}
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 1 {
		t.Errorf("%d creations: the deletion created one", n)
	}
}

// A host another request holds (Ironic's node lock: two subscriptions of one host reconciled
// together) is waited out in a few seconds: no status.error, no Warning, and not the failures'
// backoff (an hour here).
func TestSubscriptionNodeLocked(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWith(t, ns, fix, func(c *Config) { c.RetryDelay, c.Resync = time.Hour, time.Hour })
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	fix.LockSubscriptionCreates(ns, "h", 1)
	create(t, newSubscription(ns, "s", "h", false))
	sub := waitSub(t, ns, "s", "created once the node is free", func(s *metal3.BMCEventSubscription) bool { return s.Status.SubscriptionID != "" })
	if sub.Status.Error != "" {
		t.Errorf("status.error %q after a locked node", sub.Status.Error)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonCreated)
	if list := companiontest.Events(t, env.Client, ns, "BMCEventSubscription", "s"); companiontest.Count(list, ReasonFailed) != 0 {
		t.Errorf("events %q: a locked node is no failure", list)
	}
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 1 {
		t.Errorf("%d creations reached the BMC, want 1", n)
	}
}

// Deleting a subscription that never reached the BMC is not held by a host that never registers.
func TestSubscriptionDeletedBeforeRegistration(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, nil, ns, "h") // never registered
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "adopted", func(s *metal3.BMCEventSubscription) bool { return len(s.Finalizers) == 1 })
	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
}

// A subscription deleted while its host is not registered (here: its registration lost) goes at
// once. When a problem of its own spec (its headers Secret missing) stopped every create, nothing
// may remain on the BMC; after a failed create, a Warning says one may.
func TestSubscriptionDeletedUnregisteredWarnsOnlyAfterACreate(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	cache := startWith(t, ns, fix)
	hosts := map[string]*metal3.BareMetalHost{}
	for name, secret := range map[string]bool{"never-created": false, "create-failed": true} {
		hosts[name] = companiontest.NewHost(t, env.Client, fix, ns, name)
		if secret {
			create(t, builder.DataSecret(ns, name+"-headers", "Authorization", token))
			fix.FailNextFor(ns, name, fixture.OpCreateSubscription, 100)
		}
		sub := newSubscription(ns, name, name, true)
		sub.Spec.HTTPHeadersRef.Name = name + "-headers"
		create(t, sub)
	}
	waitSub(t, ns, "never-created", "the missing Secret said", func(s *metal3.BMCEventSubscription) bool {
		return strings.HasPrefix(s.Status.Error, "spec.httpHeadersRef: Secret")
	})
	waitSub(t, ns, "create-failed", "the failed create said", func(s *metal3.BMCEventSubscription) bool {
		return strings.HasPrefix(s.Status.Error, "creating the subscription on the BMC")
	})
	for _, name := range []string{"never-created", "create-failed"} {
		companiontest.SetHostStatus(t, env.Client, hosts[name], func(st *metal3.BareMetalHostStatus) { st.Provisioning.ID = "" })
		// The controller reads the host from the manager's cache: deleted before the lost
		// registration reaches it, the subscription would be taken back from the BMC instead.
		poll.Until(t, "the unregistered host "+name+" in the controller's cache", func() (bool, string) {
			cur := &metal3.BareMetalHost{}
			if err := cache.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
				return false, err.Error()
			}
			return cur.Status.Provisioning.ID == "", cur.Status.Provisioning.ID
		})
		deleteSub(t, ns, name)
		waitSubGone(t, ns, name)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "create-failed", ReasonLeft)
	if left := companiontest.Events(t, env.Client, ns, "BMCEventSubscription", "never-created"); companiontest.Count(left, ReasonLeft) != 0 {
		t.Errorf("events %q: a subscription no create was sent for may not remain on the BMC", left)
	}
}

// Deleting a subscription whose create looked failed removes what that create left on the BMC.
func TestSubscriptionDeletedAfterALostCreate(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	fix.FailNextFor(ns, "h", fixture.OpCreateSubscription, 1000)
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "its create failed", func(s *metal3.BMCEventSubscription) bool {
		return strings.Contains(s.Status.Error, "creating the subscription on the BMC")
	})
	// What the failed create left on the BMC after all (its answer was lost).
	fix.AddSubscription(ns, "h", provisioner.EventSubscription{Destination: destination, Context: "rack-7"})
	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
	if subs := fix.Subscriptions(ns, "h"); len(subs) != 0 {
		t.Errorf("BMC still has %v", subs)
	}
}

// Deleting a subscription no create was sent for (its headers Secret missing) leaves the BMC's
// subscriptions alone, one with the same destination and context included: another client's.
func TestSubscriptionNeverCreatedLeavesOthers(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, newSubscription(ns, "s", "h", true)) // its headers Secret is missing: no create
	waitSub(t, ns, "s", "waiting for its Secret", func(s *metal3.BMCEventSubscription) bool { return s.Status.Error != "" })
	other := fix.AddSubscription(ns, "h", provisioner.EventSubscription{Destination: destination, Context: "rack-7"})
	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
	if _, ok := fix.Subscriptions(ns, "h")[other]; !ok {
		t.Errorf("another client's subscription %s was deleted from the BMC: %v", other, fix.Subscriptions(ns, "h"))
	}
}

// bmc is the fixture provisioner with what its knobs cannot do: a BMC that answers the list of its
// subscriptions with an error (the fixture's injected failures reach only creates), and counts of
// the lists and of the existence checks (each check starts a reconcile of a created subscription).
type bmc struct {
	*fixture.Fixture
	mu      sync.Mutex
	listErr error
	lists   int
	checks  int
}

func (b *bmc) FindEventSubscriptions(ctx context.Context, host provisioner.Host, sub provisioner.EventSubscription) ([]string, error) {
	b.mu.Lock()
	b.lists++
	err := b.listErr
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return b.Fixture.FindEventSubscriptions(ctx, host, sub)
}

// EventSubscriptionExists reads the same list as FindEventSubscriptions, as the Ironic
// provisioner's does: failLists fails both.
func (b *bmc) EventSubscriptionExists(ctx context.Context, host provisioner.Host, id string, sub provisioner.EventSubscription) (bool, error) {
	b.mu.Lock()
	b.checks++
	err := b.listErr
	b.mu.Unlock()
	if err != nil {
		return false, err
	}
	return b.Fixture.EventSubscriptionExists(ctx, host, id, sub)
}

func (b *bmc) failLists(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listErr = err
}

func (b *bmc) listCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lists
}

func (b *bmc) checkCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checks
}

// waitCalls waits until count (listCount, checkCount) has grown by n past mark.
func (b *bmc) waitCalls(t *testing.T, what string, count func() int, mark, n int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d more %s", n, what), func() (bool, string) {
		got := count() - mark
		return got >= n, fmt.Sprintf("%d so far", got)
	})
}

func newBMC() *bmc { return &bmc{Fixture: fixture.New(fixture.Config{})} }

// errRefusedList is the Ironic provisioner's error for a BMC without an EventService (Ironic answers
// 500 with sushy's "… returned code 404"): the BMC's refusal, not ErrUnavailable.
var errRefusedList = fmt.Errorf("reading the event subscriptions of the BMC of host h: %w: %s", provisioner.ErrBMCRefused,
	"HTTP GET https://192.0.2.1/redfish/v1/EventService/Subscriptions returned code 404. Base.1.0.ResourceMissingAtURI")

// A subscription with no id recorded can be deleted while its BMC refuses to list its subscriptions
// (nothing can be looked for, and no retry changes the answer), with a Warning naming the
// destination to look for; while the BMC or Ironic does not answer, the deletion waits.
func TestSubscriptionDeletedWhileTheBMCRefusesTheList(t *testing.T) {
	ns := env.Namespace(t)
	b := newBMC()
	cache := startWith(t, ns, b)
	companiontest.NewHost(t, env.Client, b.Fixture, ns, "h")
	b.failLists(fmt.Errorf("reading the event subscriptions of the BMC of host h: %w: the BMC failed", provisioner.ErrUnavailable))
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "the unavailable BMC said", func(s *metal3.BMCEventSubscription) bool {
		return strings.Contains(s.Status.Error, "reading the subscriptions of the BMC") && len(s.Finalizers) == 1
	})

	deleteSub(t, ns, "s")
	held := func() {
		t.Helper()
		if !companiontest.Get(t, env.Client, ns, "s", &metal3.BMCEventSubscription{}) {
			t.Fatal("deleted while the BMC did not answer: a subscription it has could not be looked for")
		}
	}
	deleting := &metal3.BMCEventSubscription{}
	poll.Until(t, "the deletion in the cache", func() (bool, string) {
		held()
		return companiontest.Get(t, cache, ns, "s", deleting) && !deleting.DeletionTimestamp.IsZero(), "not marked yet"
	})
	// Reconciles of one object do not overlap: the third list starts once the second, which
	// began after the deletion reached the cache, is written.
	mark := b.listCount()
	poll.Until(t, "3 more lists of the unavailable BMC", func() (bool, string) {
		held()
		n := b.listCount() - mark
		return n >= 3, fmt.Sprintf("%d so far", n)
	})
	held()

	b.failLists(errRefusedList)
	waitSubGone(t, ns, "s")
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonLeft)
	left := companiontest.Events(t, env.Client, ns, "BMCEventSubscription", "s")
	if companiontest.Count(left, destination) == 0 || companiontest.Count(left, "refused") == 0 {
		t.Errorf("events %q: want the Warning to name the destination and the BMC's refusal", left)
	}
	if n := b.Count(ns, "h", fixture.OpCreateSubscription); n != 0 {
		t.Errorf("%d creations reached the BMC", n)
	}
}

// A BMC that refuses to list its subscriptions for good (an account that may create but not read
// them) still gets the subscription: the look for a lost create is skipped, not waited on.
func TestSubscriptionCreatedWhileTheBMCRefusesTheList(t *testing.T) {
	ns := env.Namespace(t)
	b := newBMC()
	startWith(t, ns, b)
	companiontest.NewHost(t, env.Client, b.Fixture, ns, "h")
	b.failLists(errRefusedList)
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "created", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.Error == ""
	})
	if n := b.Count(ns, "h", fixture.OpCreateSubscription); n != 1 {
		t.Errorf("%d creations reached the BMC, want 1", n)
	}
	if n := b.listCount(); n == 0 {
		t.Error("the BMC was never asked for its subscriptions: the look for a lost create was skipped without trying")
	}
	// Its checks, refused too, keep it: no error, no second create.
	b.waitCalls(t, "checks", b.checkCount, b.checkCount(), 2)
	if got := waitSub(t, ns, "s", "kept", func(*metal3.BMCEventSubscription) bool { return true }); got.Status.Error != "" || got.Status.SubscriptionID == "" {
		t.Errorf("after refused checks: id %q, error %q; want the id kept and no error", got.Status.SubscriptionID, got.Status.Error)
	}
	if n := b.Count(ns, "h", fixture.OpCreateSubscription); n != 1 {
		t.Errorf("%d creations after refused checks, want 1", n)
	}

	deleteSub(t, ns, "s")
	waitSubGone(t, ns, "s")
	if subs := b.Subscriptions(ns, "h"); len(subs) != 0 {
		t.Errorf("BMC still has %v after the deletion", subs)
	}
}

// A subscription created before its host (GitOps) says the host is missing, and no longer once the
// host exists, although it is not registered yet.
func TestSubscriptionBeforeItsHost(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	create(t, newSubscription(ns, "s", "h", false))
	waitSub(t, ns, "s", "no host said", func(s *metal3.BMCEventSubscription) bool {
		return strings.HasPrefix(s.Status.Error, `spec.hostName: no BareMetalHost "h"`)
	})
	companiontest.NewHost(t, env.Client, nil, ns, "h") // not registered
	sub := waitSub(t, ns, "s", "the missing host no longer said", func(s *metal3.BMCEventSubscription) bool {
		return len(s.Finalizers) == 1 && s.Status.Error == ""
	})
	if sub.Status.SubscriptionID != "" {
		t.Errorf("subscription %q created before the host registered", sub.Status.SubscriptionID)
	}
}

// A change of the headers Secret's metadata alone (a label) is not a new token: the subscription on
// the BMC is kept.
func TestSubscriptionHeadersSecretRelabelled(t *testing.T) {
	ns := env.Namespace(t)
	b := newBMC()
	cache := startWith(t, ns, b)
	companiontest.NewHost(t, env.Client, b.Fixture, ns, "h")
	create(t, builder.DataSecret(ns, "headers", "Authorization", token), newSubscription(ns, "s", "h", true))
	sub := waitSub(t, ns, "s", "created, the headers' version recorded", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Annotations[metal3.HTTPHeadersVersionAnnotation] != ""
	})

	secret := &corev1.Secret{}
	companiontest.Update(t, env.Client, ns, "headers", secret, func() { metav1.SetMetaDataLabel(&secret.ObjectMeta, "team", "storage") })
	cached := &corev1.Secret{}
	companiontest.Wait(t, cache, ns, "headers", "the label in the cache", cached, func() bool { return cached.Labels["team"] == "storage" })
	// Each check starts a reconcile, which reads the Secret after it; the second starts once the
	// first, which saw the label, is written.
	b.waitCalls(t, "checks of the subscription", b.checkCount, b.checkCount(), 2)

	got := &metal3.BMCEventSubscription{}
	companiontest.Get(t, env.Client, ns, "s", got)
	if got.Status.SubscriptionID != sub.Status.SubscriptionID ||
		got.Annotations[metal3.HTTPHeadersVersionAnnotation] != sub.Annotations[metal3.HTTPHeadersVersionAnnotation] {
		t.Errorf("subscription %q, version %q after a label change; want %q, %q kept", got.Status.SubscriptionID,
			got.Annotations[metal3.HTTPHeadersVersionAnnotation], sub.Status.SubscriptionID, sub.Annotations[metal3.HTTPHeadersVersionAnnotation])
	}
	if n := b.Count(ns, "h", fixture.OpCreateSubscription); n != 1 {
		t.Errorf("%d creations, want 1", n)
	}
	if list := companiontest.Events(t, env.Client, ns, "BMCEventSubscription", "s"); companiontest.Count(list, ReasonHeadersChanged) != 0 {
		t.Errorf("events %q: the headers did not change", list)
	}
}

// The Secret's resourceVersion an earlier operator recorded is replaced by the headers' version
// without a renewal while the Secret still has it, and renews the subscription once when the
// Secret changed since.
func TestSubscriptionHeadersVersionOfAnEarlierOperator(t *testing.T) {
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	start(t, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	create(t, builder.DataSecret(ns, "headers", "Authorization", token), newSubscription(ns, "s", "h", true))
	secret := &corev1.Secret{}
	want := ""
	sub := waitSub(t, ns, "s", "created, the headers' version recorded", func(s *metal3.BMCEventSubscription) bool {
		companiontest.Get(t, env.Client, ns, "headers", secret)
		want = headersVersion(secret, map[string]string{"Authorization": token})
		return s.Status.SubscriptionID != "" && s.Annotations[metal3.HTTPHeadersVersionAnnotation] == want
	})
	first := sub.Status.SubscriptionID

	recordOld := func(version string) {
		t.Helper()
		cur := &metal3.BMCEventSubscription{}
		companiontest.Update(t, env.Client, ns, "s", cur, func() { cur.Annotations[metal3.HTTPHeadersVersionAnnotation] = version })
	}
	recordOld(secret.ResourceVersion)
	sub = waitSub(t, ns, "s", "the headers' version recorded again", func(s *metal3.BMCEventSubscription) bool {
		return s.Annotations[metal3.HTTPHeadersVersionAnnotation] == want
	})
	if sub.Status.SubscriptionID != first || fix.Count(ns, "h", fixture.OpCreateSubscription) != 1 {
		t.Errorf("subscription %q after %d creations: an unchanged Secret renewed it", sub.Status.SubscriptionID, fix.Count(ns, "h", fixture.OpCreateSubscription))
	}

	recordOld("1") // a resourceVersion the Secret had before
	waitSub(t, ns, "s", "renewed", func(s *metal3.BMCEventSubscription) bool {
		return s.Status.SubscriptionID != "" && s.Status.SubscriptionID != first && s.Annotations[metal3.HTTPHeadersVersionAnnotation] == want
	})
	if n := fix.Count(ns, "h", fixture.OpCreateSubscription); n != 2 {
		t.Errorf("%d creations, want 2 (the first, one renewal)", n)
	}
	companiontest.WaitEvent(t, env.Client, ns, "BMCEventSubscription", "s", ReasonHeadersChanged)
}
