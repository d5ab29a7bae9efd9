package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

// The suite runs the real API server with config/sro/webhook installed and this package's
// webhooks served, so the checks are those a client meets.
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Webhooks: true, WebhookPaths: []string{"config/sro/webhook"}}, &env)
}

func serve(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{Host: env.WebhookHost, Port: env.WebhookPort, CertDir: env.WebhookCertDir})})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupWithManager(mgr); err != nil {
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
}

func valid(name string) *sro.SpecialResource {
	return &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sro.SpecialResourceSpec{
		DriverContainer: sro.SpecialResourceDriverContainer{Image: "registry.example/kmod:{{.KernelFullVersion}}", Modules: []string{"kmod"}}}}
}

// TestWebhookRefuses: what a client sees: 422 naming the field, for a bad template, an unknown
// recipe, and a dependency cycle through stored objects; a valid one is admitted.
func TestWebhookRefuses(t *testing.T) {
	serve(t)
	ctx := context.Background()
	create := func(sr *sro.SpecialResource) error {
		var err error
		for range 100 { // the webhook server may take a moment to answer
			err = env.Client.Create(ctx, sr)
			if err == nil || apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err == nil {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sr) })
		}
		return err
	}
	a := valid("wh-a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "wh-b"}}
	if err := create(a); err != nil {
		t.Fatalf("valid SpecialResource refused: %v", err)
	}
	badTemplate := valid("wh-bad")
	badTemplate.Spec.DriverContainer.BuildArgs = []sro.BuildArg{{Name: "K", Value: "{{.KernelVersio}}"}}
	unknown := valid("wh-recipe")
	unknown.Spec.Recipe.Name = "nvidia-gpu"
	cycle := valid("wh-b")
	cycle.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "wh-a"}}
	for _, tc := range []struct {
		sr    *sro.SpecialResource
		field string
		msg   string
	}{
		{badTemplate, "spec.driverContainer.buildArgs[0].value", "can't evaluate field KernelVersio"},
		{unknown, "spec.recipe.name", "Unsupported value"},
		{cycle, "spec.dependsOn[0].name", "dependency cycle: wh-b → wh-a → wh-b"},
	} {
		err := create(tc.sr)
		var status apierrors.APIStatus
		if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
			t.Errorf("%s: %v, want Invalid", tc.sr.Name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s: %s", tc.sr.Name, err, tc.field, tc.msg)
		}
	}

	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "wh-pv"}, Spec: sro.PreflightValidationSpec{KernelVersion: "five dot fourteen"}}
	if err := env.Client.Create(ctx, pv); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.kernelVersion") {
		t.Errorf("PreflightValidation with a bad kernel: %v", err)
	}
}

// TestUpdateKeepsOldProblems: an object admitted with a problem (no webhook then) can still be
// updated (a finalizer added, a label), but not given a new problem.
func TestUpdateKeepsOldProblems(t *testing.T) {
	v := &SpecialResourceValidator{}
	old := valid("x")
	old.Spec.DriverContainer.Modules = nil
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	if _, err := v.ValidateUpdate(context.Background(), old, labelled); err != nil {
		t.Fatalf("update keeping the old problem refused: %v", err)
	}
	worse := labelled.DeepCopy()
	worse.Spec.Namespace = "Not_A_Namespace"
	if _, err := v.ValidateUpdate(context.Background(), old, worse); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.namespace") {
		t.Fatalf("a new problem: %v", err)
	}
}
