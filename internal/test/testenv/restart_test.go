package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRestartAPIServerKeepsDataAndClients restarts the package's API server twice (envtest's
// process, then the one the first restart started): what was stored before is still there, and
// both the test's client and a client from the kubeconfig file work without being recreated.
func TestRestartAPIServerKeepsDataAndClients(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before"}, Data: map[string]string{"k": "v"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		first, _, err := env.apiServerCommand()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.RestartAPIServer(ctx, 0); err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		second, _, err := env.apiServerCommand()
		if err != nil {
			t.Fatal(err)
		}
		if second == first {
			t.Errorf("restart %d: kube-apiserver still has pid %d", i+1, first)
		}
		for name, c := range map[string]client.Client{"the test's client": env.Client, "a kubeconfig client": fromFile} {
			var got corev1.ConfigMap
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "before"}, &got); err != nil || got.Data["k"] != "v" {
				t.Errorf("restart %d: %s reading the ConfigMap written before: %v, data %v", i+1, name, err, got.Data)
			}
		}
	}
}
