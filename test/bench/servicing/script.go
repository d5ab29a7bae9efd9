package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/test/procstat"
)

// runScript services every node directly through Ironic's API, one goroutine per node: the steps
// the operator takes for a reboot annotation with a pending BIOS setting (soft power off, then
// servicing), with the same poll intervals. The value goes back to Enabled, so the step does work.
func (b *bench) runScript(ctx context.Context, ids []string) (*result, error) {
	c, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: b.ironic.Endpoint()})
	if err != nil {
		return nil, err
	}
	c.Microversion = "1.95"
	steps := []nodes.ServiceStep{{Interface: nodes.InterfaceBIOS, Step: "apply_configuration",
		Args: map[string]any{"settings": []map[string]any{{"name": "ProcTurboMode", "value": "Enabled"}}}}}
	ironic0 := ironicCPU(b.ironic)
	fmt.Printf("script: soft power off and servicing of %d nodes\n", len(ids))
	start := time.Now()
	var (
		mu    sync.Mutex
		times []time.Duration
		errs  []string
		wg    sync.WaitGroup
	)
	for _, id := range ids {
		wg.Go(func() {
			err := b.serviceNode(ctx, c, id, steps)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("node %s: %v", id, err))
				return
			}
			times = append(times, time.Since(start))
		})
	}
	wg.Wait()
	r := &result{name: "script", hostTimes: times, errors: errs, ironicCPU: ironicCPU(b.ironic) - ironic0, load: procstat.LoadAverage()}
	for _, srv := range b.sim.Hosts() {
		if d, err := b.sim.Control.Server(srv.Name); err == nil && d.State.BIOS["ProcTurboMode"] != nil && d.State.BIOS["ProcTurboMode"] != "Enabled" {
			r.errors = append(r.errors, fmt.Sprintf("%s: bmcsim ProcTurboMode %v after servicing", srv.Name, d.State.BIOS["ProcTurboMode"]))
		}
	}
	return r, nil
}

func (b *bench) serviceNode(ctx context.Context, c *serviceClient, id string, steps []nodes.ServiceStep) error {
	if err := untilAccepted(ctx, b.o.shortPoll, func() error {
		return nodes.ChangePowerState(ctx, c, id, nodes.PowerStateOpts{Target: nodes.SoftPowerOff}).ExtractErr()
	}); err != nil {
		return fmt.Errorf("soft power off: %w", err)
	}
	if err := poll(ctx, b.o.shortPoll, c, id, func(n *nodes.Node) (bool, error) {
		return n.PowerState == "power off" && n.TargetPowerState == "", nil
	}); err != nil {
		return err
	}
	if err := untilAccepted(ctx, b.o.shortPoll, func() error {
		return nodes.ChangeProvisionState(ctx, c, id, nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: steps}).ExtractErr()
	}); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	return poll(ctx, b.o.longPoll, c, id, func(n *nodes.Node) (bool, error) {
		switch nodes.ProvisionState(n.ProvisionState) {
		case nodes.Active:
			return n.TargetProvisionState == "", nil
		case nodes.ServiceFail:
			return false, fmt.Errorf("service failed: %s", n.LastError)
		}
		return false, nil
	})
}

// untilAccepted repeats a request Ironic refuses with 409 (node locked), as any client must.
func untilAccepted(ctx context.Context, every time.Duration, req func() error) error {
	for {
		err := req()
		if err == nil || !isConflict(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// poll reads the node every interval until done says so.
func poll(ctx context.Context, every time.Duration, c *serviceClient, id string, done func(*nodes.Node) (bool, error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		n, err := nodes.Get(ctx, c, id).Extract()
		if err != nil {
			continue // a busy Ironic: read again at the next poll
		}
		if ok, err := done(n); ok || err != nil {
			return err
		}
	}
}
