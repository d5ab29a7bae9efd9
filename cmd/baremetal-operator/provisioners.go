package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/provisioner/ironic"
)

// provisionerFactories is the seam between flags and provisioning engines. The Ironic provisioner
// reads metal3's environment variables (IRONIC_ENDPOINT, DEPLOY_KERNEL_URL, ...).
var provisionerFactories = map[string]func(context.Context, options) (provisioner.Provisioner, error){
	"ironic": func(_ context.Context, o options) (provisioner.Provisioner, error) {
		cfg, err := ironic.ConfigFromEnv(func(c *ironic.Config) { c.PreprovisioningImageBuilder = o.buildPreprovImage })
		if err != nil {
			return nil, err
		}
		o.tuning.applyIronic(&cfg)
		log := ctrl.Log.WithName("ironic")
		log.Info("Ironic provisioner configured", "config", cfg.String())
		return ironic.New(cfg, log)
	},
	"fixture": func(_ context.Context, o options) (provisioner.Provisioner, error) {
		return o.fixture.build(o.buildPreprovImage)
	},
}

// fixtureOptions configure --provisioner=fixture, for tests and benchmarks.
type fixtureOptions struct {
	latency   time.Duration
	opLatency string
	failures  string
	capacity  int
}

func (f *fixtureOptions) bindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&f.latency, "fixture-latency", 0, "Fixture provisioner: how long each operation takes (0: at once).")
	fs.StringVar(&f.opLatency, "fixture-op-latency", "", "Fixture provisioner: per-operation latency, e.g. provision=2s,inspect=500ms.")
	fs.StringVar(&f.failures, "fixture-fail", "", "Fixture provisioner: fail the next N operations of a kind, e.g. provision=2,power=1.")
	fs.IntVar(&f.capacity, "fixture-capacity", 0, "Fixture provisioner: hosts busy at once (0: no limit).")
}

func (f *fixtureOptions) build(images bool) (provisioner.Provisioner, error) {
	lat, err := fixture.ParseLatencies(f.opLatency)
	if err != nil {
		return nil, fmt.Errorf("--fixture-op-latency: %w", err)
	}
	fail, err := fixture.ParseFailures(f.failures)
	if err != nil {
		return nil, fmt.Errorf("--fixture-fail: %w", err)
	}
	return fixture.New(fixture.Config{DefaultLatency: f.latency, Latency: lat, FailNext: fail, Capacity: f.capacity,
		PreprovisioningImages: images}), nil
}
