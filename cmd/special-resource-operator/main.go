// Command special-resource-operator runs the SpecialResource, node-kernel, PreflightValidation
// and (on OpenShift) ClusterOperator controllers, and with --webhook-port the sro.openshift.io
// admission webhooks. Flags and wiring only: the behaviour lives in internal/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/nodekernel"
	"github.com/metalforge/metalforge/internal/controller/preflightvalidation"
	"github.com/metalforge/metalforge/internal/controller/specialresource"
	"github.com/metalforge/metalforge/internal/controller/sroclusteroperator"
	"github.com/metalforge/metalforge/internal/managerconfig"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
	srowebhook "github.com/metalforge/metalforge/internal/sro/webhook"
)

type options struct {
	concurrency        int
	manager            managerconfig.Flags
	namespace          string
	clusterOperator    string
	buildBackend       string
	buildImage         string
	insecureRegistries []string
}

func main() {
	var o options
	logCfg := textlogger.NewConfig()
	fs := flag.CommandLine
	fs.IntVar(&o.concurrency, "concurrency", 10, "SpecialResources reconciled at once.")
	o.manager.Bind(fs, managerconfig.Defaults{QPS: 200, Burst: 400, ProbeAddr: ":8081"})
	fs.StringVar(&o.namespace, "operator-namespace", os.Getenv("OPERATOR_NAMESPACE"), "The operator's namespace (reported on the ClusterOperator).")
	fs.StringVar(&o.clusterOperator, "cluster-operator", sroclusteroperator.DefaultName, "Name of the ClusterOperator to report on, where the cluster has ClusterOperators (empty: none).")
	fs.StringVar(&o.buildBackend, "build-backend", "auto", "How to build missing driver images: openshift (build.openshift.io), job (kaniko in a Job), or auto (openshift where served).")
	fs.StringVar(&o.buildImage, "build-image", build.DefaultJobImage, "The kaniko executor image of Job builds.")
	fs.Func("insecure-registry", "A registry (host[:port]) spoken to over plain HTTP; repeat for several. Loopback and private addresses always are.", func(v string) error {
		for r := range strings.SplitSeq(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				o.insecureRegistries = append(o.insecureRegistries, r)
			}
		}
		return nil
	})
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
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	o.manager.ConfigureClient(cfg, "metalforge-special-resource-operator")
	// Which build backend (and so which cache views) depends on what the cluster serves.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("creating an HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("discovering the cluster's APIs: %w", err)
	}
	openShiftBuilds := build.HasOpenShiftBuilds(mapper)
	if o.buildBackend == "job" {
		openShiftBuilds = false
	}
	views := specialresource.CacheViews(openShiftBuilds)
	cacheOpts, clientOpts, err := cacheview.Options(nil, views...)
	if err != nil {
		return err
	}
	for _, line := range cacheview.Describe(views...) {
		log.Info("Cached reads are reduced", "view", line)
	}
	mgrOpts := o.manager.ManagerOptions(scheme.New(), "special-resource-operator.sro.openshift.io", cacheOpts, clientOpts)
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	builder, err := chooseBuilder(mgr, o)
	if err != nil {
		return err
	}
	registry := image.Remote{Insecure: o.insecureRegistries}

	if err := (&nodekernel.Reconciler{Concurrency: 4}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the node-kernel controller: %w", err)
	}
	srCfg := specialresource.DefaultConfig()
	srCfg.Concurrency = o.concurrency
	sr := &specialresource.Reconciler{Registry: registry, Builder: builder, Config: srCfg}
	if err := sr.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the SpecialResource controller: %w", err)
	}
	pv := &preflightvalidation.Reconciler{Registry: registry, Builder: builder, ClusterVersion: sr.ClusterVersion}
	if err := pv.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the PreflightValidation controller: %w", err)
	}
	hasCO := false
	if _, err := mgr.GetRESTMapper().RESTMapping(configv1.GroupVersion.WithKind("ClusterOperator").GroupKind(), "v1"); err == nil && o.clusterOperator != "" {
		hasCO = true
		co := &sroclusteroperator.Reconciler{Name: o.clusterOperator, Version: version(), Namespace: o.namespace}
		if err := co.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the ClusterOperator controller: %w", err)
		}
	}
	if o.manager.WebhookPort != 0 {
		if err := srowebhook.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the webhooks: %w", err)
		}
	}
	if err := o.manager.AddHealthChecks(mgr); err != nil {
		return err
	}
	log.Info("Starting the special-resource-operator", "version", version(), "builds", builder.Kind(), "clusterOperator", hasCO,
		"webhookPort", o.manager.WebhookPort, "concurrency", o.concurrency)
	return mgr.Start(ctx)
}

// chooseBuilder picks the build backend.
func chooseBuilder(mgr ctrl.Manager, o options) (build.Builder, error) {
	c := mgr.GetClient()
	switch o.buildBackend {
	case "auto":
		return build.Choose(c, o.buildImage), nil
	case "openshift":
		return build.OpenShift{Client: c}, nil
	case "job":
		return build.Job{Client: c, Image: o.buildImage}, nil
	}
	return nil, fmt.Errorf("--build-backend=%q: want auto, openshift or job", o.buildBackend)
}

// version is the module version the binary was built from ("devel" in a work tree).
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
