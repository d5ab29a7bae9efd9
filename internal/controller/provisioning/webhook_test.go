package provisioning

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestProvisioningWebhook: the operator's webhook, served from the certificate store, refuses
// what the platform does not support and every invalid field, naming it, through the real API
// server.
func TestProvisioningWebhook(t *testing.T) {
	setup(t, options{platform: configv1.AWSPlatformType, noStart: true})
	store := NewCertStore()
	host, portStr, _ := net.SplitHostPort(loopback.FreeAddr())
	port, _ := strconv.Atoi(portStr)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{Host: host, Port: port, TLSOpts: []func(*tls.Config){store.TLSOption}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupWebhook(mgr); err != nil {
		t.Fatal(err)
	}
	data, err := secrets.Apply(secrets.Plan{Action: secrets.Replace}, nil, "test", []string{host}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Set(data); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	url := "https://" + net.JoinHostPort(host, portStr) + "/validate-metal3-io-v1alpha1-provisioning"
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "test-provisioning-webhook"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: "provisioning.metal3.io", AdmissionReviewVersions: []string{"v1"}, FailurePolicy: &fail, SideEffects: &none,
			ClientConfig: admissionv1.WebhookClientConfig{URL: &url, CABundle: data[secrets.KeyCA]},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{APIGroups: []string{"metal3.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"provisionings"}}}},
		}},
	}
	if err := env.Client.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })

	create := func(name string, spec metal3.ProvisioningSpec) error {
		return env.Client.Create(context.Background(), &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	}
	// The server may take a moment to answer: the first call retries until it does.
	var first error
	poll.Until(t, "the webhook to answer", func() (bool, string) {
		first = create(metal3.ProvisioningSingletonName, managedSpec)
		if first == nil {
			// Written before the API server used the new configuration: undo, try again.
			err := env.Client.Delete(context.Background(), &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName}})
			return false, "created before the webhook was called (deleted: " + errString(err) + ")"
		}
		return strings.Contains(first.Error(), "denied"), "error " + errString(first)
	})
	if msg := first.Error(); !strings.Contains(msg, "spec.provisioningNetwork") || !strings.Contains(msg, "platform AWS") {
		t.Errorf("Managed on AWS refused with %q: want the field and the platform", msg)
	}
	if err := create("my-provisioning", disabled); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a misnamed object: %v", err)
	}
	if err := create(metal3.ProvisioningSingletonName, disabled); err != nil {
		t.Fatalf("Disabled on AWS: %v", err)
	}
	err = func() error {
		p := getProvisioning(t)
		p.Spec.ExternalIPs = []string{"ten"}
		return env.Client.Update(context.Background(), p)
	}()
	if err == nil || !strings.Contains(err.Error(), "spec.externalIPs[0]") {
		t.Errorf("an invalid update: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

// TestWebhookConfigurationLetsADeletedProvisioningGo: the fail-closed webhook configuration the
// operator writes outlives it (uninstalled, scaled down); a Provisioning being deleted must still
// lose its finalizers without a server answering: the configuration does not send such objects.
func TestWebhookConfigurationLetsADeletedProvisioningGo(t *testing.T) {
	setup(t, options{noStart: true})
	ctx := context.Background()
	p := &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName, Finalizers: []string{"example.com/held"}},
		Spec: metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The operator's configuration, with no server behind its Service.
	if err := env.Client.Create(ctx, render.CBOWebhookConfiguration("no-operator-here", nil)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the configuration in force: a live object's update is refused", func() (bool, string) {
		p := getProvisioning(t)
		p.Labels = map[string]string{"touched": strconv.FormatInt(time.Now().UnixNano(), 10)}
		err := env.Client.Update(ctx, p)
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), errString(err)
	})
	if err := env.Client.Delete(ctx, getProvisioning(t)); err != nil {
		t.Fatal(err)
	}
	p = getProvisioning(t)
	p.Finalizers = nil
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatalf("removing the finalizer of the deleted Provisioning: %v", err)
	}
	poll.Until(t, "the Provisioning gone", func() (bool, string) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: metal3.ProvisioningSingletonName}, &metal3.Provisioning{})
		return apierrors.IsNotFound(err), errString(err)
	})
}
