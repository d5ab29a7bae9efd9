package hostfleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

func TestCreatePatchWatch(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]*metal3.BareMetalHost{}
	gone := map[string]bool{}
	if err := Watch(ctx, env.Config, ns, func(h *metal3.BareMetalHost, deleted bool) {
		mu.Lock()
		defer mu.Unlock()
		seen[h.Name], gone[h.Name] = h, deleted
	}); err != nil {
		t.Fatal(err)
	}
	server := bmcsim.Host{Name: "srv-0", Username: "srv-0", Password: "pw", BootMAC: "52:54:00:00:00:01",
		Addresses: map[string]string{"redfish-virtualmedia+http": "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/x"}}
	if err := Create(ctx, env.Client, ns, "h", server); err != nil {
		t.Fatal(err)
	}
	if err := Create(ctx, env.Client, ns, "h", server); err != nil {
		t.Errorf("creating again what exists: %v, want nil (a retry after a lost answer)", err)
	}
	var secret corev1.Secret
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: SecretName("h")}, &secret); err != nil ||
		string(secret.Data["username"]) != "srv-0" || string(secret.Data["password"]) != "pw" {
		t.Errorf("Secret %s: %v, data %v; want the server's credentials", SecretName("h"), err, secret.Data)
	}
	image := metal3.Image{URL: "http://images/a.img", Checksum: "abc", ChecksumType: metal3.SHA256}
	if err := PatchImage(ctx, env.Client, ns, "h", &image); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watch to see the image", func() bool {
		mu.Lock()
		defer mu.Unlock()
		h := seen["h"]
		return h != nil && h.Spec.Image != nil && h.Spec.Image.URL == image.URL && h.Spec.BMC.Address == server.Addresses["redfish-virtualmedia+http"] &&
			h.Spec.BootMACAddress == server.BootMAC && h.Spec.Online
	})
	if err := PatchImage(ctx, env.Client, ns, "h", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watch to see the image removed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["h"].Spec.Image == nil
	})
	if err := env.Client.Delete(ctx, seen["h"].DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watch to see the host deleted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return gone["h"]
	})
}

func TestParallel(t *testing.T) {
	var calls [100]atomic.Int32
	if err := Parallel(len(calls), func(i int) error { calls[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("fn(%d) ran %d times, want once", i, n)
		}
	}
	boom := errors.New("boom")
	if err := Parallel(10, func(i int) error {
		if i == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("Parallel = %v, want the error of fn(3)", err)
	}
}

func TestUnlimitedLeavesTheConfigAlone(t *testing.T) {
	cfg := env.Config
	qps := cfg.QPS
	u := Unlimited(cfg)
	if u.QPS != -1 || cfg.QPS != qps {
		t.Errorf("Unlimited: QPS %v (want -1), original now %v (want %v)", u.QPS, cfg.QPS, qps)
	}
	if _, err := client.New(u, client.Options{Scheme: env.Scheme}); err != nil {
		t.Errorf("a client from the unlimited config: %v", err)
	}
}

// waitFor polls cond until it holds; go test's -timeout bounds it (no wall-clock limit here: a
// loaded machine is slow, not wrong).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
