package ironicenv

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// Bed is what an end-to-end suite runs its operators on: an API server, an Ironic of its own,
// bmcsim's servers with their agents, and an image server. The suite starts its own processes
// (the operator, a controller) on top and stops them before Close.
type Bed struct {
	Kube   *testenv.Env
	Ironic *Instance
	Sim    *Sim
	Images *ImageServer
	free   chan bmcsim.Host
}

// BedOptions says what a Bed starts.
type BedOptions struct {
	Ironic  Options
	Kube    testenv.Options
	Servers int
	// Build, if set, runs while Ironic and the API server start (the suite's Go builds).
	Build func() error
}

// StartBed starts Ironic, the API server and Build together, then the simulated servers and the
// image server. On an error it stops what it started and returns no Bed.
func StartBed(o BedOptions) (b *Bed, err error) {
	b = &Bed{}
	defer func() {
		if err != nil {
			b.Close()
			b = nil
		}
	}()
	var wg sync.WaitGroup
	var buildErr, ironicErr error
	if o.Build != nil {
		wg.Go(func() { buildErr = o.Build() })
	}
	wg.Go(func() { b.Ironic, ironicErr = Start(o.Ironic) })
	b.Kube, err = testenv.Start(o.Kube)
	wg.Wait()
	if err = errors.Join(err, buildErr, ironicErr); err != nil {
		return b, err
	}

	agentCfg := FastAgent(b.Ironic.URL())
	// Ironic (one Python process) is what limits the suites on two cores: agents heartbeat every
	// 5 s (they also heartbeat when a command ends, which is what moves a deploy on) and look
	// their node up once a second, instead of several times a second.
	agentCfg.HeartbeatInterval, agentCfg.LookupInterval = 5*time.Second, time.Second
	if b.Sim, err = StartSim(SimOptions{Config: FastConfig(o.Servers), Agent: agentCfg}); err != nil {
		return b, err
	}
	b.free = make(chan bmcsim.Host, o.Servers)
	for _, h := range b.Sim.Hosts() {
		b.free <- h
	}
	b.Images = NewImageServer()
	return b, nil
}

// Take gives a test a simulated server of its own; the test fails when none is left.
func (b *Bed) Take(t *testing.T) bmcsim.Host {
	t.Helper()
	select {
	case h := <-b.free:
		return h
	default:
		t.Fatalf("all %d simulated servers are taken: start the bed with more", cap(b.free))
	}
	return bmcsim.Host{}
}

// Close stops what StartBed started: the simulated servers and the image server first (they call
// Ironic and are called by it), then Ironic (its instance purged) and the API server.
func (b *Bed) Close() {
	if b.Sim != nil {
		_ = b.Sim.Close()
	}
	if b.Images != nil {
		b.Images.Close()
	}
	if b.Ironic != nil {
		if err := b.Ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Ironic:", err)
		}
	}
	if b.Kube != nil {
		_ = b.Kube.Stop()
	}
}
