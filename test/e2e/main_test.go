// Package e2e runs the whole system as an operator of a data center would: a real API server
// (envtest's kube-apiserver + etcd from bin/), a real Ironic (hack/ironic-up.sh, an instance of
// its own), bmcsim with its agents in this process, and bin/baremetal-operator as a subprocess with
// --provisioner=ironic and its admission webhooks. The tests drive it only through the Kubernetes
// API (Secrets, BareMetalHosts, annotations) and check the results there, on bmcsim's servers, on
// the image server's download counts and in Ironic.
//
// E2E_HOSTS (default 10) sets how many hosts go through the full lifecycle at once.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/operatorproc"
	"github.com/metalforge/metalforge/internal/test/sharedsuite"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// extraHosts are the simulated servers the scenarios besides the lifecycle take.
const extraHosts = 11

// ironicConf is appended to the test Ironic's configuration: a crashed agent fails its deploy
// within a minute (heartbeats reset the timer, so healthy deploys are unaffected), timeouts are
// checked every 5 s, and the power poll after the agent powered the server off waits 1 s.
const ironicConf = `
[conductor]
check_provision_state_interval = 5
deploy_callback_timeout = 30
clean_callback_timeout = 300
inspect_wait_timeout = 300
service_callback_timeout = 300

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 30
`

// suite is everything the tests share. It starts on first use, so `go test -short` and `-run` of
// nothing start nothing; TestMain stops it.
type suite struct {
	kube   *testenv.Env
	c      client.Client
	ironic *ironicenv.Instance
	// nodes reads Ironic directly, for assertions only (the tests never drive Ironic).
	nodes  *gophercloud.ServiceClient
	sim    *ironicenv.Sim
	images *ironicenv.ImageServer
	op     *operatorproc.Process
	rec    *recorder
	free   chan bmcsim.Host

	mu sync.Mutex
	// survivors are provisioned hosts the scenarios leave behind for the database-wipe test.
	survivors []survivor
	// wrongPasswords are passwords the scenarios put in Secrets, checked against logs too.
	wrongPasswords []string
}

// theSuite starts on first use; TestMain stops it.
var theSuite = &sharedsuite.Suite[*suite]{
	Name: "end-to-end", Unavailable: ironicenv.Unavailable, Start: startSuite, Stop: (*suite).stop,
}

func TestMain(m *testing.M) {
	// The scenarios wait on Ironic, not on the CPU: run them all at once unless told otherwise.
	code, _, ran, took := theSuite.Main(m, "64")
	if ran {
		fmt.Fprintf(os.Stderr, "e2e: suite ran %s from the first start\n", took.Round(time.Second))
	}
	os.Exit(code)
}

// e2e returns the running suite, or skips the test when it cannot run here.
func e2e(t *testing.T) *suite {
	t.Helper()
	return theSuite.Get(t)
}

func lifecycleHosts() int {
	if v := os.Getenv("E2E_HOSTS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return 10
}

func startSuite() (s *suite, err error) {
	s = &suite{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	// The Go builds and Ironic's start are independent; run them together.
	var wg sync.WaitGroup
	var buildErr, ironicErr error
	var binary string
	wg.Go(func() { binary, buildErr = buildOperator() })
	wg.Go(func() {
		s.ironic, ironicErr = ironicenv.Start(ironicenv.Options{
			Instance:  fmt.Sprintf("e2e-%d", os.Getpid()),
			ExtraConf: ironicConf,
			WipeDB:    true,
			OwnerPID:  os.Getpid(),
		})
	})
	s.kube, err = testenv.Start(testenv.Options{Webhooks: true})
	wg.Wait()
	if err != nil {
		return s, err
	}
	if buildErr != nil {
		return s, buildErr
	}
	if ironicErr != nil {
		return s, ironicErr
	}
	s.c = s.kube.Client
	s.nodes, err = noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: s.ironic.Endpoint()})
	if err != nil {
		return s, err
	}
	s.nodes.Microversion = "1.95"

	n := lifecycleHosts() + extraHosts
	agentCfg := ironicenv.FastAgent(s.ironic.URL())
	// Ironic (one Python process) is what limits the suite on two cores: agents heartbeat every
	// 5 s (they also heartbeat when a command ends, which is what moves a deploy on) and look
	// their node up once a second, instead of several times a second.
	agentCfg.HeartbeatInterval = 5 * time.Second
	agentCfg.LookupInterval = time.Second
	s.sim, err = ironicenv.StartSim(ironicenv.SimOptions{Config: ironicenv.FastConfig(n), Agent: agentCfg})
	if err != nil {
		return s, err
	}
	s.free = make(chan bmcsim.Host, n)
	for _, h := range s.sim.Hosts() {
		s.free <- h
	}
	s.images = ironicenv.NewImageServer()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.rec, err = startRecorder(ctx, s.kube.Config)
	if err != nil {
		return s, err
	}
	s.op, err = startOperator(ctx, binary, s.kube, s.ironic)
	return s, err
}

func (s *suite) stop() {
	if s.op != nil {
		s.op.Stop()
	}
	if s.rec != nil {
		s.rec.stop()
	}
	if s.sim != nil {
		_ = s.sim.Close()
	}
	if s.images != nil {
		s.images.Close()
	}
	if s.ironic != nil {
		if err := s.ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping Ironic:", err)
		}
	}
	if s.kube != nil {
		_ = s.kube.Stop()
	}
}

// take gives a test a simulated server of its own.
func (s *suite) take(t *testing.T) bmcsim.Host {
	t.Helper()
	select {
	case h := <-s.free:
		return h
	default:
		t.Fatal("no free simulated server: raise extraHosts")
	}
	return bmcsim.Host{}
}
