package testenv

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

var env *Env

// The harness tests itself with webhooks on, the harder setup.
func TestMain(m *testing.M) { Main(m, Options{Webhooks: true}, &env) }

func TestCRDsAreInstalled(t *testing.T) {
	ns := env.Namespace(t)
	var hosts metal3.BareMetalHostList
	if err := env.Client.List(context.Background(), &hosts); err != nil {
		t.Fatalf("listing BareMetalHosts: %v", err)
	}
	var provs metal3.ProvisioningList
	if err := env.Client.List(context.Background(), &provs); err != nil {
		t.Fatalf("listing Provisionings: %v", err)
	}
	var nonsense corev1.ConfigMapList
	if err := env.Client.List(context.Background(), &nonsense); err != nil {
		t.Fatalf("listing ConfigMaps in %s: %v", ns, err)
	}
}

func TestNamespaceIsFreshAndDeletedAfterTheTest(t *testing.T) {
	var names []string
	for range 2 {
		t.Run("sub/Test With Spaces", func(t *testing.T) {
			names = append(names, env.Namespace(t))
		})
	}
	if names[0] == names[1] {
		t.Fatalf("two calls gave the same namespace %q", names[0])
	}
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, name := range names {
		if !label.MatchString(name) || len(name) > 63 {
			t.Errorf("namespace %q is not a DNS label", name)
		}
		// Long names are cut to leave room for the random suffix.
		if !strings.HasPrefix(name, "testnamespaceisfreshanddeletedafterthetest-sub-test-with-") {
			t.Errorf("namespace %q is not named after its test", name)
		}
		var ns corev1.Namespace
		err := env.Client.Get(context.Background(), types.NamespacedName{Name: name}, &ns)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Errorf("getting namespace %s: %v", name, err)
		case ns.DeletionTimestamp.IsZero():
			t.Errorf("namespace %s was not deleted at the end of its test", name)
		}
	}
}

func TestNamespaceNameIsABoundedDNSLabel(t *testing.T) {
	long := strings.Repeat("VeryLongTestName_", 10)
	for _, in := range []string{long, "---", "Test/Sub_Test#01"} {
		got := namespaceName(in)
		if len(got) > 63 || !regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(got) {
			t.Errorf("namespaceName(%q) = %q, not a DNS label", in, got)
		}
	}
	if got := namespaceName("---"); !strings.HasPrefix(got, "test-") {
		t.Errorf("a test name without letters gives %q, want the prefix test-", got)
	}
}

// The kubeconfig file is what out-of-process binaries (operators under test, kubectl) get.
func TestKubeconfigFileReachesTheServer(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath)
	if err != nil {
		t.Fatalf("loading %s: %v", env.KubeconfigPath, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("getting the default namespace through the kubeconfig: %v", err)
	}
}

func TestWebhookServingIsPrepared(t *testing.T) {
	if env.WebhookHost == "" || env.WebhookPort == 0 {
		t.Fatalf("webhook serving address not set: %q:%d", env.WebhookHost, env.WebhookPort)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(env.WebhookCertDir, f)); err != nil {
			t.Errorf("webhook certificate: %v", err)
		}
	}
}

func TestMissingBinariesGiveAHint(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := Start(Options{})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start without binaries: got %v, want an error telling to run make tools", err)
	}
}
