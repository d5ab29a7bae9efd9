package managerconfig

import (
	"flag"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalforge/metalforge/internal/scheme"
)

func parse(t *testing.T, d Defaults, args ...string) Flags {
	t.Helper()
	var f Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f.Bind(fs, d)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBindKeepsEachOperatorsDefaults(t *testing.T) {
	f := parse(t, Defaults{QPS: 200, Burst: 400, ProbeAddr: ":8081"})
	want := Flags{QPS: 200, Burst: 400, MetricsAddr: ":8080", ProbeAddr: ":8081", PprofAddr: "0", WebhookPort: 9443,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	if f != want {
		t.Fatalf("defaults: got %+v, want %+v", f, want)
	}
	f = parse(t, Defaults{QPS: 500, Burst: 1000, ProbeAddr: ":9440"}, "--kube-api-qps=-1", "--webhook-port=0", "--leader-elect", "--leader-election-namespace=ns")
	if f.QPS != -1 || f.Burst != 1000 || f.ProbeAddr != ":9440" || f.WebhookPort != 0 || !f.LeaderElect || f.LeaderElectionNS != "ns" {
		t.Fatalf("parsed: %+v", f)
	}
}

func TestConfigureClient(t *testing.T) {
	for _, tc := range []struct {
		name         string
		qps          float64
		burst        int
		wantLimiter  bool
		wantQPS      float32
		wantBurstCfg int
	}{
		{name: "a negative QPS turns the client-side limit off", qps: -1, burst: 10, wantQPS: -1, wantBurstCfg: 0},
		{name: "a positive QPS is one limiter shared by every client", qps: 50, burst: 70, wantLimiter: true, wantQPS: 50, wantBurstCfg: 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &rest.Config{}
			Flags{QPS: tc.qps, Burst: tc.burst}.ConfigureClient(cfg, "agent")
			if cfg.UserAgent != "agent" || cfg.QPS != tc.wantQPS || cfg.Burst != tc.wantBurstCfg || (cfg.RateLimiter != nil) != tc.wantLimiter {
				t.Fatalf("got user agent %q, QPS %v, burst %d, limiter %v", cfg.UserAgent, cfg.QPS, cfg.Burst, cfg.RateLimiter != nil)
			}
			if cfg.WrapTransport == nil {
				t.Fatal("API requests are not counted: no transport wrapper")
			}
		})
	}
}

func TestManagerOptionsWebhookServerOnlyWithAPort(t *testing.T) {
	f := Flags{MetricsAddr: ":1", ProbeAddr: ":2", PprofAddr: "0", LeaderElect: true, LeaderElectionNS: "ns", WebhookPort: 0}
	opts := f.ManagerOptions(scheme.New(), "lease", cache.Options{}, client.Options{})
	if opts.WebhookServer != nil {
		t.Fatal("--webhook-port=0 still configures a webhook server")
	}
	if opts.Metrics.BindAddress != ":1" || opts.HealthProbeBindAddress != ":2" || !opts.LeaderElection ||
		opts.LeaderElectionID != "lease" || opts.LeaderElectionNamespace != "ns" || opts.Scheme == nil {
		t.Fatalf("options not taken from the flags: %+v", opts)
	}
	f.WebhookPort, f.WebhookCertDir = 9443, "/certs"
	if opts := f.ManagerOptions(scheme.New(), "lease", cache.Options{}, client.Options{}); opts.WebhookServer == nil {
		t.Fatal("--webhook-port=9443 configures no webhook server")
	}
}

func TestManagerOptionsUseTheMemoizedMapper(t *testing.T) {
	opts := Flags{}.ManagerOptions(scheme.New(), "id", cache.Options{}, client.Options{})
	if opts.MapperProvider == nil {
		t.Fatal("no MapperProvider: the manager would use the dynamic mapper alone")
	}
}

// TestLeaderElectionTimings: the lease flags reach the manager (a renew deadline of 10 s makes a
// leader exit whenever the API server is away longer, so the operators must be able to say more).
func TestLeaderElectionTimings(t *testing.T) {
	f := parse(t, Defaults{}, "--leader-elect", "--leader-elect-lease-duration=137s", "--leader-elect-renew-deadline=107s", "--leader-elect-retry-period=26s")
	opts := f.ManagerOptions(scheme.New(), "lease", cache.Options{}, client.Options{})
	for name, tc := range map[string]struct {
		got  *time.Duration
		want time.Duration
	}{
		"lease duration": {opts.LeaseDuration, 137 * time.Second},
		"renew deadline": {opts.RenewDeadline, 107 * time.Second},
		"retry period":   {opts.RetryPeriod, 26 * time.Second},
	} {
		if tc.got == nil || *tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", name, tc.got, tc.want)
		}
	}
	if !opts.LeaderElectionReleaseOnCancel {
		t.Error("the lease is not given back on stop: the next pod of a rollout waits for it to expire")
	}
	if opts := (Flags{}).ManagerOptions(scheme.New(), "lease", cache.Options{}, client.Options{}); opts.LeaseDuration != nil || opts.RenewDeadline != nil || opts.RetryPeriod != nil {
		t.Error("flags without timings override controller-runtime's defaults")
	}
}
