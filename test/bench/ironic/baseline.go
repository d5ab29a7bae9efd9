package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/provisioner/ironic"
	"github.com/metalforge/metalforge/internal/test/procstat"
)

// baseline drives Ironic directly: what the operator asks Ironic to do, without the operator.
type baseline struct {
	e     *env
	c     *gophercloud.ServiceClient
	mu    sync.Mutex
	calls map[string]*atomic.Int64
	// stalls are the nodes Ironic left in a working state with nobody working on them.
	stalls *stalls
}

type phaseKey struct{}

// countingTransport counts requests by the phase in the request's context.
type countingTransport struct {
	b    *baseline
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	phase, _ := req.Context().Value(phaseKey{}).(string)
	t.b.mu.Lock()
	c := t.b.calls[phase]
	if c == nil {
		c = &atomic.Int64{}
		t.b.calls[phase] = c
	}
	t.b.mu.Unlock()
	c.Add(1)
	return t.next.RoundTrip(req)
}

// hostRun is one host of the baseline.
type hostRun struct {
	srv  bmcsim.Host
	name string
	node string
	err  error
	at   map[string]time.Time
	// failures are the failed attempts that were retried (failed inspections).
	failures []string
}

func (e *env) runBaseline() (*result, error) {
	fmt.Printf("baseline: %d hosts driven directly through Ironic's API, one goroutine each\n", e.o.n)
	c, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: e.ironic.Endpoint()})
	if err != nil {
		return nil, err
	}
	// The microversion the operator negotiates with Ironic 39.
	c.Microversion = "1.110"
	b := &baseline{e: e, c: c, calls: map[string]*atomic.Int64{}}
	// The operator's connection settings (see newServiceClient in internal/provisioner/ironic), so
	// that the two differ in what they ask of Ironic, not in how they reach it.
	c.HTTPClient = http.Client{Transport: countingTransport{b: b, next: &http.Transport{
		MaxConnsPerHost: ironic.DefaultMaxConnections, MaxIdleConnsPerHost: ironic.DefaultMaxConnections,
		IdleConnTimeout: 5 * time.Second,
	}}}

	ctx, cancel := context.WithTimeout(context.Background(), e.o.timeout)
	defer cancel()
	r := &result{name: "baseline", wall: map[string]time.Duration{}, hostTimes: map[string][]time.Duration{}, calls: map[string]float64{}, loadBefore: procstat.LoadAverage()}
	r.logFrom = e.ironicLogSize()
	cpu0 := procstat.CPUSeconds(os.Getpid())
	var hosts []*hostRun
	for i, srv := range e.sim.Hosts() {
		hosts = append(hosts, &hostRun{srv: srv, name: fmt.Sprintf("bench~host-%04d", i), at: map[string]time.Time{}})
	}

	b.stalls = e.watchStalls(ctx, nil)
	start := time.Now()
	b.each(ctx, hosts, "available", b.registerAndInspect)
	r.record("registered", start, times(hosts, "registered"))
	r.record("available", start, times(hosts, "available"))
	for _, step := range []struct {
		phase string
		fn    func(context.Context, *hostRun) error
	}{
		{"provisioned", b.provision},
		{"deprovisioned", b.deprovision},
		{"deleted", b.delete},
	} {
		t := time.Now()
		b.each(ctx, hosts, step.phase, step.fn)
		r.record(step.phase, t, times(hosts, step.phase))
	}
	for _, p := range phases[1:] {
		r.total += r.wall[p]
	}
	// As for the operator, a host counts as errored when it failed at some point, recovered or not.
	for _, h := range hosts {
		switch {
		case h.err != nil:
			r.errored++
			r.gaveUp++
			r.errors = append(r.errors, fmt.Sprintf("%s: %v", h.srv.Name, h.err))
		case len(h.failures) > 0:
			r.errored++
			r.errors = append(r.errors, fmt.Sprintf("%s: %s (retried)", h.srv.Name, h.failures[0]))
		}
	}
	r.stalled = b.stalls.count()
	for phase, n := range b.calls {
		r.calls[phase] = float64(n.Load())
	}
	e.ironicUsage(r)
	r.benchCPU = procstat.CPUSeconds(os.Getpid()) - cpu0
	r.loadAfter = procstat.LoadAverage()
	return r, nil
}

// each runs fn for every host that has not failed, all at once, and waits for them.
func (b *baseline) each(ctx context.Context, hosts []*hostRun, phase string, fn func(context.Context, *hostRun) error) {
	ctx = context.WithValue(ctx, phaseKey{}, phase)
	start := time.Now()
	var wg sync.WaitGroup
	var done atomic.Int64
	for _, h := range hosts {
		if h.err != nil {
			continue
		}
		wg.Go(func() {
			// A host that failed does not count in the phase's time: the operator run leaves
			// stalled hosts out the same way (tracker.exclude).
			if err := fn(ctx, h); err != nil {
				h.err = fmt.Errorf("%s: %w", phase, err)
			} else {
				h.at[phase] = time.Now()
			}
			done.Add(1)
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	_ = waitAll(ctx, phase, start, func() int { return int(done.Load()) }, len(hosts), finished)
	<-finished
}

// times are the hosts' times of reaching phase (hosts that failed before have none).
func times(hosts []*hostRun, phase string) []time.Time {
	var at []time.Time
	for _, h := range hosts {
		if t, ok := h.at[phase]; ok {
			at = append(at, t)
		}
	}
	return at
}

// registerAndInspect: enroll with the interfaces, driver_info and deploy ISO the operator sets,
// the boot MAC's port, manage (Ironic checks the BMC), then agent inspection.
func (b *baseline) registerAndInspect(ctx context.Context, h *hostRun) error {
	addr := h.srv.Addresses["redfish-virtualmedia+http"]
	access, err := bmc.Parse(addr)
	if err != nil {
		return err
	}
	info := access.DriverInfo(h.srv.Username, h.srv.Password, false)
	info["deploy_iso"] = b.e.ironic.Vars["DEPLOY_ISO_URL"]
	clean := true
	n, err := nodes.Create(ctx, b.c, nodes.CreateOpts{
		Name: h.name, Driver: access.Driver, DriverInfo: info,
		BootInterface: access.Interfaces.Boot, BIOSInterface: access.Interfaces.BIOS,
		ManagementInterface: access.Interfaces.Management, PowerInterface: access.Interfaces.Power,
		RAIDInterface: access.Interfaces.RAID, VendorInterface: access.Interfaces.Vendor,
		FirmwareInterface: access.Interfaces.Firmware, InspectInterface: "agent",
		AutomatedClean: &clean, Properties: map[string]any{"capabilities": "boot_mode:uefi"},
	}).Extract()
	if err != nil {
		return fmt.Errorf("enrolling: %w", err)
	}
	h.node = n.UUID
	pxe := true
	if _, err := ports.Create(ctx, b.c, ports.CreateOpts{NodeUUID: n.UUID, Address: strings.ToLower(h.srv.BootMAC), PXEEnabled: &pxe}).Extract(); err != nil {
		return fmt.Errorf("creating the port: %w", err)
	}
	if err := b.act(ctx, h, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, "manageable", b.e.o.shortPoll); err != nil {
		return err
	}
	// Ironic under load sometimes fails an inspection (sqlite "database is locked" in its hooks);
	// the operator, like metal3, inspects again, so the baseline does too, up to three attempts.
	inspect := nodes.ProvisionStateOpts{Target: nodes.TargetInspect}
	for attempt := 1; ; attempt++ {
		err := b.ask(ctx, h, inspect)
		if attempt == 1 && err == nil {
			// Registered once the inspection is asked for: the operator's host leaves registering
			// with the status write after its inspect request, so both runs stamp that moment.
			h.at["registered"] = time.Now()
		}
		if err == nil {
			err = b.await(ctx, h, inspect, "manageable", b.e.o.longPoll)
		}
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return err
		}
		h.failures = append(h.failures, err.Error())
	}
}

// provision: provide (automated cleaning), instance_info, deploy with a config drive.
func (b *baseline) provision(ctx context.Context, h *hostRun) error {
	if err := b.act(ctx, h, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, "available", b.e.o.longPoll); err != nil {
		return err
	}
	if err := retry(ctx, b.e.o.shortPoll, func() error {
		_, err := nodes.Update(ctx, b.c, h.node, nodes.UpdateOpts{
			nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: b.e.image.url},
			nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
			nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_value", Value: b.e.image.sha256},
			nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_disk_format", Value: "raw"},
		}).Extract()
		return err
	}); err != nil {
		return fmt.Errorf("setting instance_info: %w", err)
	}
	cd := &nodes.ConfigDrive{MetaData: map[string]any{"uuid": h.node, "name": h.srv.Name, "local-hostname": h.srv.Name}}
	return b.act(ctx, h, nodes.ProvisionStateOpts{Target: nodes.TargetActive, ConfigDrive: cd}, "active", b.e.o.longPoll)
}

// deprovision: undeploy with automated cleaning.
func (b *baseline) deprovision(ctx context.Context, h *hostRun) error {
	return b.act(ctx, h, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, "available", b.e.o.longPoll)
}

// delete powers the node off, as the operator (and metal3) does before it deletes a host, and
// removes it.
func (b *baseline) delete(ctx context.Context, h *hostRun) error {
	if err := retry(ctx, b.e.o.shortPoll, func() error {
		return nodes.ChangePowerState(ctx, b.c, h.node, nodes.PowerStateOpts{Target: nodes.PowerOff}).ExtractErr()
	}); err != nil {
		return fmt.Errorf("power off: %w", err)
	}
	for {
		n, err := nodes.Get(ctx, b.c, h.node).Extract()
		if err != nil && !transient(err) {
			return err
		}
		if err == nil && n.PowerState == string(nodes.PowerOff) && n.TargetPowerState == "" {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.e.o.shortPoll):
		}
	}
	return retry(ctx, b.e.o.shortPoll, func() error { return nodes.Delete(ctx, b.c, h.node).ExtractErr() })
}

// act asks for a provision state change (retrying while the node is locked or Ironic is busy) and
// polls the node every poll until it reaches want, or fails.
func (b *baseline) act(ctx context.Context, h *hostRun, opts nodes.ProvisionStateOpts, want string, poll time.Duration) error {
	if err := b.ask(ctx, h, opts); err != nil {
		return err
	}
	return b.await(ctx, h, opts, want, poll)
}

// ask sends the provision-state change until Ironic accepts it.
func (b *baseline) ask(ctx context.Context, h *hostRun, opts nodes.ProvisionStateOpts) error {
	if err := retry(ctx, b.e.o.shortPoll, func() error {
		return nodes.ChangeProvisionState(ctx, b.c, h.node, opts).ExtractErr()
	}); err != nil {
		return fmt.Errorf("%s: %w", opts.Target, err)
	}
	return nil
}

// await polls the node until it reaches want with no target, or fails.
func (b *baseline) await(ctx context.Context, h *hostRun, opts nodes.ProvisionStateOpts, want string, poll time.Duration) error {
	for {
		n, err := nodes.Get(ctx, b.c, h.node).Extract()
		if err != nil && !transient(err) {
			return err
		}
		if err == nil {
			switch {
			case n.ProvisionState == want && n.TargetProvisionState == "":
				return nil
			case strings.HasSuffix(n.ProvisionState, "failed") || n.ProvisionState == "error" ||
				(n.ProvisionState == "enroll" && n.LastError != "" && n.TargetProvisionState == ""):
				return fmt.Errorf("%s: node %s: %s", opts.Target, n.ProvisionState, n.LastError)
			}
		}
		if why := b.stalls.reason(h.name); why != "" {
			return fmt.Errorf("%s: %s", opts.Target, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// retry calls fn until it succeeds or fails with something other than "busy" (409) or
// "temporarily unavailable" (503).
func retry(ctx context.Context, every time.Duration, fn func() error) error {
	for {
		err := fn()
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(every):
		}
	}
}

// transient: busy (409), temporarily unavailable (503), or no HTTP answer at all (a connection an
// overloaded Ironic reset or closed), which the operator also retries.
func transient(err error) bool {
	var ue *url.Error
	return gophercloud.ResponseCodeIs(err, http.StatusConflict) || gophercloud.ResponseCodeIs(err, http.StatusServiceUnavailable) ||
		(errors.As(err, &ue) && !ue.Timeout())
}
