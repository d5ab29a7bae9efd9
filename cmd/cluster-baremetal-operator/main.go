// Command cluster-baremetal-operator deploys the bare-metal provisioning stack (Ironic and the
// baremetal-operator) from the Provisioning singleton and reports on it through the `baremetal`
// ClusterOperator. Flags and wiring only: the behaviour lives in internal/controller/provisioning.
//
// It runs in a cluster (service account) or outside with KUBECONFIG. RELEASE_VERSION is the
// release it belongs to (the ClusterOperator's operator version).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/metalforge/metalforge/internal/controller/provisioning"
	"github.com/metalforge/metalforge/internal/scheme"
)

type options struct {
	metricsAddr      string
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	imagesPath       string
	namespace        string
	webhookPort      int
}

// Leader election timings of OpenShift's operators (library-go): a lease of 137 s renewed within
// 107 s, retried every 26 s, so that an API server outage of two minutes does not cost the lease.
const (
	leaseDuration = 137 * time.Second
	renewDeadline = 107 * time.Second
	retryPeriod   = 26 * time.Second
)

func main() {
	var o options
	logCfg := textlogger.NewConfig()
	fs := flag.CommandLine
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint (plain HTTP; 0 disables it).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":9440", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election lease (default: the pod's).")
	fs.StringVar(&o.imagesPath, "images-json", "/etc/cluster-baremetal-operator/images/images.json", "The images file (the cluster-baremetal-operator-images ConfigMap's images.json).")
	fs.StringVar(&o.namespace, "namespace", "openshift-machine-api", "Namespace of the provisioning stack.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the Provisioning admission webhook (0: no webhook, and its configuration is removed).")
	logCfg.AddFlags(fs)
	flag.Parse()

	ctrl.SetLogger(textlogger.NewLogger(logCfg))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	cfg.UserAgent = "cluster-baremetal-operator"

	// Plain HTTP, as the baremetal-operator's: controller-runtime's authenticated HTTPS filter
	// would add k8s.io/apiserver (about a hundred packages) for one endpoint.
	metrics := metricsserver.Options{BindAddress: o.metricsAddr}
	lease, renew, retry := leaseDuration, renewDeadline, retryPeriod
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Cache:                   provisioning.CacheOptions(o.namespace),
		Metrics:                 metrics,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "cluster-baremetal-operator",
		LeaderElectionNamespace: o.leaderElectionNS,
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             &retry,
		// Given back when the manager stops (main returns at once): the next pod does not wait
		// out the 137 s lease.
		LeaderElectionReleaseOnCancel: true,
	}
	var certs *provisioning.CertStore
	if o.webhookPort != 0 {
		certs = provisioning.NewCertStore()
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Port: o.webhookPort, TLSOpts: []func(*tls.Config){certs.TLSOption}})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	r := &provisioning.Reconciler{WebhookCerts: certs, Config: provisioning.Config{
		Namespace: o.namespace, ImagesPath: o.imagesPath, ReleaseVersion: os.Getenv("RELEASE_VERSION"),
	}}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	ready := healthz.Ping
	if certs != nil {
		if err := provisioning.SetupWebhook(mgr); err != nil {
			return err
		}
		// Every replica serves the webhook: each loads the certificate the leader keeps.
		if err := mgr.Add(&provisioning.CertLoader{Reader: mgr.GetAPIReader(), Namespace: o.namespace, Store: certs, Interval: 30 * time.Second}); err != nil {
			return fmt.Errorf("adding the certificate loader: %w", err)
		}
		// Ready once the webhook serves its certificate, or once the loader found that the
		// platform gets no stack: nothing is served there and no certificate is ever made.
		ready = certs.Readiness(mgr.GetWebhookServer().StartedChecker())
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	log.Info("Starting the operator", "namespace", o.namespace, "images", o.imagesPath, "release", os.Getenv("RELEASE_VERSION"),
		"webhookPort", o.webhookPort)
	return mgr.Start(ctx)
}
