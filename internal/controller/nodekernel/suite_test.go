package nodekernel

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// TestNodeLabelledWithItsKernel: a node is labelled with the kernel it reports, relabelled when
// it reboots into another, and its other labels are left alone.
func TestNodeLabelledWithItsKernel(t *testing.T) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Reconciler{SkipNameValidation: true}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodekernel-a", Labels: map[string]string{"keep": "me"}}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Client.Delete(context.Background(), n) }()
	for _, k := range []string{"5.14.0-284.el9.x86_64", "5.14.0-362.el9.x86_64"} {
		n.Status.NodeInfo.KernelVersion = k
		if err := env.Client.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the node labelled with kernel "+k, func() (bool, string) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
				t.Fatal(err)
			}
			return n.Labels[sro.KernelLabel] == k, fmt.Sprintf("labels %v", n.Labels)
		})
		if n.Labels["keep"] != "me" {
			t.Fatalf("another label was lost: %v", n.Labels)
		}
	}
}
