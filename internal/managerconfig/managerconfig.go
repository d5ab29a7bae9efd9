// Package managerconfig is what the baremetal-operator and the special-resource-operator set up
// alike around their controller-runtime manager: the flags of its endpoints, leader election,
// webhook server and client rate limit, the client's request counting, the manager's options, the
// health checks, the garbage collector's target (gc.go) and a REST mapper that remembers what it
// found (restmapper.go). Each binary keeps its own controllers, defaults and user agent. (The
// cluster-baremetal-operator has fixed lease timings and no rate-limit flags, and sets up its own;
// it renders the baremetal-operator's lease timings as flags.)
package managerconfig

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/metalforge/metalforge/internal/apimetrics"
)

// Flags are the manager's command-line settings.
type Flags struct {
	QPS              float64
	Burst            int
	MetricsAddr      string
	ProbeAddr        string
	PprofAddr        string
	LeaderElect      bool
	LeaderElectionNS string
	WebhookPort      int
	WebhookCertDir   string

	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election. A leader that cannot
	// renew its lease within RenewDeadline (the API server away) exits; the defaults are
	// controller-runtime's, and the cluster-baremetal-operator renders OpenShift's 137/107/26 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Defaults are the flag defaults that differ between the operators.
type Defaults struct {
	QPS       float64
	Burst     int
	ProbeAddr string
}

// Bind declares the flags on fs.
func (f *Flags) Bind(fs *flag.FlagSet, d Defaults) {
	fs.Float64Var(&f.QPS, "kube-api-qps", d.QPS, "Client-side limit on API requests per second (negative: no limit).")
	fs.IntVar(&f.Burst, "kube-api-burst", d.Burst, "Client-side burst of API requests.")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint (0 disables it).")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", d.ProbeAddr, "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (0 disables them).")
	fs.BoolVar(&f.LeaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&f.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election lease (default: the pod's).")
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long non-leaders wait before taking over a lease that was not renewed.")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing its lease before it gives up and exits (less than the lease duration).")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader election clients retry.")
	fs.IntVar(&f.WebhookPort, "webhook-port", 9443, "Port of the admission webhook server (0: no webhooks).")
	fs.StringVar(&f.WebhookCertDir, "webhook-cert-dir", "", "Directory with tls.crt and tls.key for the webhook server (default: controller-runtime's).")
}

// ConfigureClient names the client and sets one rate limiter shared by every client of the
// manager (otherwise each resource's REST client gets its own bucket and the flag means little),
// and counts API requests (metalforge_api_requests_total, which the benchmarks read).
func (f Flags) ConfigureClient(cfg *rest.Config, userAgent string) {
	cfg.UserAgent = userAgent
	if f.QPS < 0 {
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	} else {
		cfg.QPS, cfg.Burst = float32(f.QPS), f.Burst
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(f.QPS), f.Burst)
	}
	cfg.Wrap(apimetrics.Wrap)
}

// ManagerOptions are the manager's options from the flags, with the binary's scheme, leader
// election lease name and cache reductions (cacheview.Options).
func (f Flags) ManagerOptions(scheme *runtime.Scheme, leaderElectionID string, cacheOpts cache.Options, clientOpts client.Options) ctrl.Options {
	opts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Client:                  clientOpts,
		Metrics:                 metricsserver.Options{BindAddress: f.MetricsAddr},
		HealthProbeBindAddress:  f.ProbeAddr,
		PprofBindAddress:        f.PprofAddr,
		LeaderElection:          f.LeaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: f.LeaderElectionNS,
		LeaseDuration:           durationOrDefault(f.LeaseDuration),
		RenewDeadline:           durationOrDefault(f.RenewDeadline),
		RetryPeriod:             durationOrDefault(f.RetryPeriod),
		// The lease is given back when the manager stops (the binaries exit as soon as Start
		// returns): with the cluster-baremetal-operator's 137 s lease, the next pod of a Recreate
		// rollout would otherwise wait for it to expire, hosts unreconciled meanwhile.
		LeaderElectionReleaseOnCancel: true,
		MapperProvider:                newMemoizedRESTMapper,
	}
	if f.WebhookPort != 0 {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Port: f.WebhookPort, CertDir: f.WebhookCertDir})
	}
	return opts
}

// durationOrDefault leaves a zero duration (Flags built without Bind) to controller-runtime.
func durationOrDefault(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// AddHealthChecks adds /healthz (the process answers) and /readyz: with webhooks, ready once the
// webhook server serves, so that no admission request reaches a replica that cannot answer it.
func (f Flags) AddHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	ready := healthz.Ping
	if f.WebhookPort != 0 {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	return nil
}
