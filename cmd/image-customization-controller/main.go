// Command image-customization-controller builds a per-host agent image for every
// PreprovisioningImage and serves it over HTTP. It reads the configuration of OpenShift's
// image-customization-controller (environment DEPLOY_ISO, DEPLOY_INITRD, DEPLOY_KERNEL,
// IRONIC_BASE_URL, IRONIC_AGENT_IMAGE, IRONIC_RAMDISK_SSH_KEY, IP_OPTIONS, ADDITIONAL_NTP_SERVERS,
// CA_BUNDLE, IRONIC_ROOTFS_URL, HTTP_PROXY, HTTPS_PROXY, NO_PROXY, IRONIC_AGENT_PULL_SECRET or
// the file /run/secrets/pull-secret, REGISTRIES_CONF_PATH; flags -images-bind-addr and
// -images-publish-addr), so a cluster can run either. Out of a cluster it connects with
// KUBECONFIG. Flags and wiring only: the behaviour lives in internal/controller/imagecustomization
// and internal/imagecustomization.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/metalforge/metalforge/internal/bulktcp"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/imagecustomization"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/imagecustomization/imageserver"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
	"github.com/metalforge/metalforge/internal/scheme"
)

type options struct {
	bindAddr, publishAddr string
	workDir               string
	grace                 time.Duration
	minimalISO            bool
	nmcli                 string
	namespaces            []string
	concurrency           int
	metricsAddr           string
	probeAddr             string
	leaderElect           bool
}

func main() {
	var o options
	logCfg := textlogger.NewConfig()
	fs := flag.CommandLine
	fs.StringVar(&o.bindAddr, "images-bind-addr", ":8084", "Address the image server listens on.")
	fs.StringVar(&o.publishAddr, "images-publish-addr", "", "Base URL under which hosts and Ironic reach the image server, e.g. http://192.0.2.2:8084 (required).")
	fs.StringVar(&o.workDir, "work-dir", "/var/lib/image-customization-controller", "Directory for the image cache: the URL key and one small record per image. Losing it rebuilds every image under new URLs.")
	fs.DurationVar(&o.grace, "grace-period", imagecustomization.DefaultConfig().GracePeriod, "No image is built earlier than this after its PreprovisioningImage was created.")
	fs.BoolVar(&o.minimalISO, "minimal-iso", false, "Serve ISOs without the live root filesystem, which hosts fetch from IRONIC_ROOTFS_URL or from this server (for BMCs that refuse large ISOs).")
	fs.StringVar(&o.nmcli, "nmcli", "nmcli", "NetworkManager's nmcli (1.42 or later), which writes the keyfiles offline.")
	fs.Func("namespace", "Namespace to watch; repeat for several. None: all namespaces.", func(v string) error {
		for ns := range strings.SplitSeq(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.namespaces = append(o.namespaces, ns)
			}
		}
		return nil
	})
	fs.IntVar(&o.concurrency, "concurrency", imagecustomization.DefaultConfig().Concurrency, "Images reconciled at once.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "Address of the Prometheus /metrics endpoint (0 disables it).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "0", "Address of the /healthz and /readyz endpoints (0 disables them).")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	logCfg.AddFlags(fs)
	flag.Parse()
	ctrl.SetLogger(textlogger.NewLogger(logCfg))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "Image customization controller stopped")
		os.Exit(1)
	}
}

// pullSecretFile is where OpenShift's cluster-baremetal-operator mounts the agent's pull secret
// (base64 of the cluster's .dockerconfigjson), read when IRONIC_AGENT_PULL_SECRET is not set.
const pullSecretFile = "/run/secrets/pull-secret"

// agentConfig reads the agent settings from the environment (the pull secret, without
// IRONIC_AGENT_PULL_SECRET, from secretFile).
func agentConfig(log logr.Logger, secretFile string) (ignition.AgentConfig, error) {
	var c ignition.AgentConfig
	var err error
	if c.IronicURLs, err = ignition.ParseIronicURLs(os.Getenv("IRONIC_BASE_URL")); err != nil {
		return c, err
	}
	if c.AgentImage = os.Getenv("IRONIC_AGENT_IMAGE"); c.AgentImage == "" {
		return c, errors.New("IRONIC_AGENT_IMAGE is not set")
	}
	c.SSHKey = strings.TrimSpace(os.Getenv("IRONIC_RAMDISK_SSH_KEY"))
	c.IPOptions = os.Getenv("IP_OPTIONS")
	for s := range strings.SplitSeq(os.Getenv("ADDITIONAL_NTP_SERVERS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.NTPServers = append(c.NTPServers, s)
		}
	}
	// The proxy the controller fetches overrides through (Go's spelling and precedence) is the one
	// the hosts pull the agent image through.
	c.HTTPProxy = getenvAny("HTTP_PROXY", "http_proxy")
	c.HTTPSProxy = getenvAny("HTTPS_PROXY", "https_proxy")
	c.NoProxy = getenvAny("NO_PROXY", "no_proxy")
	if c.PullSecret, err = pullSecret(log, secretFile); err != nil {
		return c, err
	}
	if c.CABundle, err = caBundle(log); err != nil {
		return c, err
	}
	if c.RegistriesConf, err = registriesConf(log); err != nil {
		return c, err
	}
	return c, c.Check()
}

// getenvAny is the first of the variables that is set and not empty.
func getenvAny(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// pullSecret reads the credentials podman pulls the agent image with: IRONIC_AGENT_PULL_SECRET,
// else the file OpenShift's operator mounts (none there: no secret, for a registry that needs
// none). An unreadable or malformed secret stops the controller at start: every host would fail
// to pull its agent while its image showed Ready. Only where the secret came from is logged.
func pullSecret(log logr.Logger, file string) (ignition.PullSecret, error) {
	from, raw := "IRONIC_AGENT_PULL_SECRET", os.Getenv("IRONIC_AGENT_PULL_SECRET")
	if raw == "" {
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the pull secret %s: %w", file, err)
		}
		from, raw = file, string(data)
	}
	secret, err := ignition.ParsePullSecret(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	if secret != nil {
		log.Info("Hosts pull the agent image with the pull secret", "from", from)
	}
	return secret, nil
}

// caBundle reads the PEM bundle CA_BUNDLE names: the live system trusts it, and Ignition overrides
// are fetched trusting it besides the system's roots. Unset, or naming no file (logged), is no
// bundle: images carry no CA, and overrides are checked against the system's roots only. A file
// that is there but cannot be read stops the controller at start: it was meant to be trusted.
func caBundle(log logr.Logger) ([]byte, error) {
	return optionalFile(log, "CA_BUNDLE", os.Getenv("CA_BUNDLE"), "images carry no CA, and Ignition overrides are fetched trusting the system's roots only")
}

// registriesConf reads the containers registries.conf REGISTRIES_CONF_PATH names (the
// cluster-baremetal-operator gives the node's, which holds a disconnected cluster's mirrors):
// every image replaces the live system's with it, so that podman pulls the agent image through
// the mirrors. Unset, naming no file (logged) or empty (OpenShift's operator mounts the node's
// file with FileOrCreate: empty on a node without one) is none, the live image's own. As for
// CA_BUNDLE, a file that is there but cannot be read stops the controller at start: hosts would
// fail to pull their agent while their images showed Ready.
func registriesConf(log logr.Logger) ([]byte, error) {
	p := os.Getenv("REGISTRIES_CONF_PATH")
	data, err := optionalFile(log, "REGISTRIES_CONF_PATH", p, "images keep the live system's registries.conf, without the cluster's mirrors")
	if err != nil || len(data) == 0 {
		return nil, err
	}
	log.Info("Hosts pull the agent image with the cluster's registries.conf", "path", p)
	return data, nil
}

// optionalFile reads the file p, the value of the environment variable. Unset is no file; a path
// naming no file is none too, logged with what that means (without); a file that is there but
// cannot be read is an error naming the variable.
func optionalFile(log logr.Logger, variable, p, without string) ([]byte, error) {
	if p == "" {
		return nil, nil
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		log.Info(variable+" names no file: "+without, "path", p)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	return data, nil
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	if o.publishAddr == "" {
		return errors.New("-images-publish-addr is required")
	}
	agent, err := agentConfig(log, pullSecretFile)
	if err != nil {
		return err
	}
	// The assisted service serves its overrides over HTTPS with the cluster's CA, the one the
	// images carry. A bundle without any certificate stops the controller here: the live system
	// could not use it either.
	overrides, err := imagebuild.OverrideClient(agent.CABundle)
	if err != nil {
		return fmt.Errorf("CA_BUNDLE %s: %w", os.Getenv("CA_BUNDLE"), err)
	}
	gen := nmstate.Generator{NMCLI: o.nmcli}
	if err := gen.Check(ctx); err != nil {
		return err
	}
	catalog, err := baseimage.Load(baseimage.Paths{ISO: os.Getenv("DEPLOY_ISO"), Initrd: os.Getenv("DEPLOY_INITRD"), Kernel: os.Getenv("DEPLOY_KERNEL")})
	if err != nil {
		return err
	}
	store, err := imagestore.Open(o.workDir)
	if err != nil {
		return err
	}
	if store.Fresh {
		log.Info("The work directory has no image cache: images built before (if any) are rebuilt under new URLs", "workDir", o.workDir)
	}
	r := &imagecustomization.Reconciler{}
	b, err := imagebuild.New(imagebuild.Config{
		Catalog: catalog, Agent: agent, NMState: gen, Store: store, PublishURL: o.publishAddr,
		MinimalISO: o.minimalISO, RootfsURL: os.Getenv("IRONIC_ROOTFS_URL"), HTTPClient: overrides,
		OnChecksum: func(rec *imagestore.Record) { r.Checksummed(rec.Namespace, rec.Name) },
		Log:        ctrl.Log.WithName("imagebuild"),
	})
	if err != nil {
		return err
	}
	r.Builder = b
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	cfg.UserAgent = "metalforge-image-customization-controller"
	// The API server warns on every write of metal3's finalizer name (kept for compatibility).
	cfg.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})
	views := imagecustomization.CacheViews()
	cacheOpts, clientOpts, err := cacheview.Options(o.namespaces, views...)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(), Cache: cacheOpts, Client: clientOpts,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       "image-customization-controller.metalforge.io",
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ccfg := imagecustomization.DefaultConfig()
	ccfg.GracePeriod, ccfg.Concurrency = o.grace, o.concurrency
	r.Config = ccfg
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	srv := &imageserver.Server{Store: store, Valid: b.Valid, Log: ctrl.Log.WithName("imageserver")}
	for name, rec := range b.Statics() {
		srv.AddStatic(name, rec)
	}
	// Images are streamed with sendfile: Nagle's algorithm on while a body streams (bulktcp)
	// makes that faster.
	ln, err := bulktcp.Listen("tcp", o.bindAddr)
	if err != nil {
		return fmt.Errorf("image server: %w", err)
	}
	// The image server starts at once, without waiting for leader election: a restarted
	// controller serves the images recorded in its work directory while it waits for the lease.
	if err := mgr.Add(serveImages(ln, srv)); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(b.Start)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	log.Info("Starting", "images", ln.Addr().String(), "publish", o.publishAddr, "architectures", catalog.Arches(),
		"minimalISO", o.minimalISO, "gracePeriod", o.grace, "workDir", o.workDir, "namespaces", o.namespaces)
	return mgr.Start(ctx)
}

// serveImages runs the image server until the manager stops.
type imageRunnable struct {
	ln  net.Listener
	srv *http.Server
}

func serveImages(ln net.Listener, h http.Handler) *imageRunnable {
	return &imageRunnable{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}}
}

func (i *imageRunnable) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = i.srv.Shutdown(sctx)
	}()
	if err := i.srv.Serve(i.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("image server: %w", err)
	}
	return nil
}

// NeedLeaderElection: the image server runs without the lease.
func (i *imageRunnable) NeedLeaderElection() bool { return false }
