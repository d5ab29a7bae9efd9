package preprovisioningimage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// startController runs the controller in a manager watching ns, with the cache the binary gives
// it (the host controller's views: Secrets only when labelled).
func startController(t *testing.T, ns string, images Images, tune ...func(*Config)) {
	t.Helper()
	cacheOpts, clientOpts, err := cacheview.Options([]string{ns}, host.CacheViews()...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: cacheOpts, Client: clientOpts,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MissingNetworkDataRetry, cfg.MissingNetworkDataMaxRetry = 100*time.Millisecond, time.Second
	for _, f := range tune {
		f(&cfg)
	}
	r := &Reconciler{Images: images, Config: cfg, SkipNameValidation: true}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}

func newImage(ns, name, arch, net string, formats ...metal3.ImageFormat) *metal3.PreprovisioningImage {
	return &metal3.PreprovisioningImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       metal3.PreprovisioningImageSpec{Architecture: arch, NetworkDataName: net, AcceptFormats: formats},
	}
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"nmstate": []byte("interfaces: []\n")}}
}

func get[T client.Object](t *testing.T, ns, name string, obj T) T {
	t.Helper()
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("getting %s: %v", name, err)
	}
	return obj
}

// update re-reads obj, changes it and writes it back, retrying conflicts.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	for range 20 {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		change(obj)
		err := env.Client.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("too many conflicts")
}

// waitStatus waits until cond holds for the image's status.
func waitStatus(t *testing.T, ns, name, what string, cond func(p *metal3.PreprovisioningImage) bool) *metal3.PreprovisioningImage {
	t.Helper()
	var p *metal3.PreprovisioningImage
	poll.Until(t, "image "+name+": "+what, func() (bool, string) {
		p = get(t, ns, name, &metal3.PreprovisioningImage{})
		return cond(p), fmt.Sprintf("status %+v", p.Status)
	})
	return p
}

func condition(p *metal3.PreprovisioningImage, c metal3.ImageStatusConditionType) metav1.Condition {
	for _, x := range p.Status.Conditions {
		if x.Type == string(c) {
			return x
		}
	}
	return metav1.Condition{}
}

func ready(p *metal3.PreprovisioningImage) bool {
	c := condition(p, metal3.ConditionImageReady)
	return c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
}

func failedWith(reason string) func(p *metal3.PreprovisioningImage) bool {
	return func(p *metal3.PreprovisioningImage) bool {
		c := condition(p, metal3.ConditionImageError)
		return c.Status == metav1.ConditionTrue && c.Reason == reason && c.ObservedGeneration == p.Generation
	}
}

// events lists "reason: message" of the Events about an image.
func eventsAbout(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == "PreprovisioningImage" {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

func waitEvent(t *testing.T, ns, name, want string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("an event %q about %s", want, name), func() (bool, string) {
		events := eventsAbout(t, ns, name)
		for _, e := range events {
			if strings.Contains(e, want) {
				return true, ""
			}
		}
		return false, fmt.Sprint(events)
	})
}
