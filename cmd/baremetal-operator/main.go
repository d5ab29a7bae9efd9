// Command baremetal-operator runs the BareMetalHost controller with the HostFirmwareSettings (and
// FirmwareSchema) and HostFirmwareComponents controllers (and, with --webhook-port, the metal3.io
// admission webhooks). Flags and wiring only: the behaviour lives in internal/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalforge/metalforge/internal/controller/bmceventsubscription"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/controller/hostfirmwarecomponents"
	"github.com/metalforge/metalforge/internal/controller/hostfirmwaresettings"
	"github.com/metalforge/metalforge/internal/controller/preprovisioningimage"
	"github.com/metalforge/metalforge/internal/managerconfig"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/webhooks"
)

type options struct {
	provisioner            string
	namespaces             []string
	concurrency            int
	manager                managerconfig.Flags
	maxProvisioningRetries int
	servicingRetries       int
	buildPreprovImage      bool
	externalImageBuilder   bool
	fixture                fixtureOptions
	tuning                 tuningOptions
}

// Defaults for the client rate limit. A 1000-host rack enrolling at once costs about five
// requests per host (one Secret read and four writes) plus one Event per transition; at the old
// 20/30 that alone is minutes of client-side queueing (metal3: 544 s for 1000 hosts). The API
// server's priority and fairness already protects it from a busy client, so the client limit is
// only a guard against a runaway loop: high enough never to be the bottleneck for a rack.
const (
	defaultQPS   = 500
	defaultBurst = 1000
)

func main() {
	var o options
	logCfg := textlogger.NewConfig()
	fs := flag.CommandLine
	fs.StringVar(&o.provisioner, "provisioner", "ironic", "Provisioning engine: ironic or fixture (in memory, for tests and benchmarks).")
	fs.Func("namespace", "Namespace to watch; repeat (or separate with commas) for several. None: all namespaces.", func(v string) error {
		for ns := range strings.SplitSeq(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.namespaces = append(o.namespaces, ns)
			}
		}
		return nil
	})
	fs.IntVar(&o.concurrency, "concurrency", 20, "Hosts reconciled at once.")
	o.manager.Bind(fs, managerconfig.Defaults{QPS: defaultQPS, Burst: defaultBurst, ProbeAddr: ":9440"})
	fs.IntVar(&o.maxProvisioningRetries, "max-provisioning-retries", 5, "Failed provisioning attempts of one image before giving up (0: no limit).")
	fs.IntVar(&o.servicingRetries, "servicing-retries", 3, "Times a failed live update is started again by itself, each after the error backoff; a failure of the BMC (a server error or no answer) is retried past it (0: never; it waits for its changes to change).")
	fs.BoolVar(&o.buildPreprovImage, "build-preprov-image", false, "Give every host a PreprovisioningImage (its own agent image, with its network data) and boot the agent from it.")
	fs.BoolVar(&o.externalImageBuilder, "external-preprov-image-builder", false,
		"With --build-preprov-image: another controller (the image-customization-controller) builds the images, so the built-in one, which hands out DEPLOY_ISO_URL / DEPLOY_RAMDISK_URL, does not run.")
	o.fixture.bindFlags(fs)
	o.tuning.bindFlags(fs)
	logCfg.AddFlags(fs)
	flag.Parse()

	ctrl.SetLogger(textlogger.NewLogger(logCfg))
	managerconfig.LowerGCTarget()
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	if o.externalImageBuilder && !o.buildPreprovImage {
		return fmt.Errorf("--external-preprov-image-builder: needs --build-preprov-image")
	}
	newProvisioner, ok := provisionerFactories[o.provisioner]
	if !ok {
		return fmt.Errorf("--provisioner=%q: want one of ironic, fixture", o.provisioner)
	}
	prov, err := newProvisioner(ctx, o)
	if err != nil {
		return fmt.Errorf("creating the %s provisioner: %w", o.provisioner, err)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	o.manager.ConfigureClient(cfg, "metalforge-baremetal-operator")
	// The API server warns on every write of metal3's finalizer names (not domain-qualified, and
	// kept for compatibility): once is enough.
	cfg.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})

	// Every controller of this manager reads the same cache: its reductions are declared once here.
	views := append(host.CacheViews(), hostfirmwaresettings.CacheViews()...)
	cacheOpts, clientOpts, err := cacheview.Options(o.namespaces, views...)
	if err != nil {
		return err
	}
	for _, line := range cacheview.Describe(views...) {
		log.Info("Cached reads are reduced", "view", line)
	}
	mgrOpts := o.manager.ManagerOptions(scheme.New(), "baremetal-operator.metal3.io", cacheOpts, clientOpts)
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	hostCfg := host.DefaultConfig()
	hostCfg.Concurrency = o.concurrency
	hostCfg.MaxProvisioningRetries = o.maxProvisioningRetries
	hostCfg.ServicingRetries = o.servicingRetries
	hostCfg.PreprovisioningImages = o.buildPreprovImage
	o.tuning.applyHost(&hostCfg)
	r := &host.Reconciler{Provisioner: prov, Config: hostCfg}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the host controller: %w", err)
	}
	if err := setupImageController(ctx, mgr, o); err != nil {
		return err
	}
	hfs := &hostfirmwaresettings.Reconciler{Provisioner: prov, Config: hostfirmwaresettings.DefaultConfig()}
	if err := hfs.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	hfc := &hostfirmwarecomponents.Reconciler{Provisioner: prov, Config: hostfirmwarecomponents.DefaultConfig()}
	if err := hfc.SetupWithManager(mgr); err != nil {
		return err
	}
	bes := &bmceventsubscription.Reconciler{Provisioner: prov, Config: bmceventsubscription.DefaultConfig()}
	if err := bes.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the BMC event subscription controller: %w", err)
	}
	di := &dataimage.Reconciler{Provisioner: prov, Config: dataimage.DefaultConfig()}
	if err := di.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the data image controller: %w", err)
	}
	if o.manager.WebhookPort != 0 {
		if err := webhooks.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the webhooks: %w", err)
		}
	}
	if err := o.manager.AddHealthChecks(mgr); err != nil {
		return err
	}

	log.Info("Starting the operator", "provisioner", o.provisioner, "namespaces", o.namespaces,
		"concurrency", o.concurrency, "qps", o.manager.QPS, "burst", o.manager.Burst)
	return mgr.Start(ctx)
}

// setupImageController starts the built-in PreprovisioningImage controller when hosts get images
// (--build-preprov-image), no external builder serves them, and an image is configured (as metal3
// starts its default controller: without DEPLOY_ISO_URL or DEPLOY_RAMDISK_URL there is nothing to
// hand out).
func setupImageController(ctx context.Context, mgr ctrl.Manager, o options) error {
	log := ctrl.Log.WithName("setup")
	if !o.buildPreprovImage {
		return nil
	}
	if o.externalImageBuilder {
		log.Info("PreprovisioningImages are built by an external controller (--external-preprov-image-builder)")
		return nil
	}
	images := preprovisioningimage.ImagesFromEnv(os.Environ())
	if !images.Configured() {
		log.Info("Not starting the built-in PreprovisioningImage controller: no DEPLOY_ISO_URL or DEPLOY_RAMDISK_URL with DEPLOY_KERNEL_URL; an external image builder must serve the images")
		return nil
	}
	cfg := preprovisioningimage.DefaultConfig()
	cfg.Concurrency = o.concurrency
	ic := &preprovisioningimage.Reconciler{Images: images, Config: cfg}
	if err := ic.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the PreprovisioningImage controller: %w", err)
	}
	log.Info("Built-in PreprovisioningImage controller started", "images", images.String())
	return nil
}
