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

	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/operatorproc"
	"github.com/metalforge/metalforge/internal/test/sharedsuite"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// extraHosts are the simulated servers the scenarios besides the lifecycle take.
const extraHosts = 13

// ironicConf is appended to the test Ironic's configuration: a crashed agent fails its deploy
// within a few minutes, timeouts are checked every 5 s, and the power poll after the agent powered
// the server off waits 1 s. Heartbeats reset the deploy timer, but on two busy cores Ironic's API
// took up to 35 s to answer one (make test runs this suite beside the Ironic package tests and
// their own Ironic): at 30 s healthy deploys failed on a timeout, and a retry made them miss their
// deadline. 120 s keeps them clear and adds 90 s to the crash scenario only.
const ironicConf = `
[conductor]
check_provision_state_interval = 5
deploy_callback_timeout = 120
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
	*ironicenv.Bed
	c client.Client
	// nodes reads Ironic directly, for assertions only (the tests never drive Ironic).
	nodes *gophercloud.ServiceClient
	op    *operatorproc.Process
	rec   *recorder

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
	var binary string
	s.Bed, err = ironicenv.StartBed(ironicenv.BedOptions{
		Ironic: ironicenv.Options{
			Instance: fmt.Sprintf("e2e-%d", os.Getpid()), ExtraConf: ironicConf, WipeDB: true, OwnerPID: os.Getpid(),
			MemoizeKeyDerivation: true,
		},
		Kube:    testenv.Options{Webhooks: true},
		Servers: lifecycleHosts() + extraHosts,
		Build:   func() (err error) { binary, err = buildOperator(); return err },
	})
	if err != nil {
		return s, err
	}
	s.c = s.Kube.Client
	s.nodes, err = noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: s.Ironic.Endpoint()})
	if err != nil {
		return s, err
	}
	s.nodes.Microversion = "1.95"

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.rec, err = startRecorder(ctx, s.Kube.Config)
	if err != nil {
		return s, err
	}
	s.op, err = startOperator(ctx, binary, s.Kube, s.Ironic)
	return s, err
}

func (s *suite) stop() {
	if s.op != nil {
		s.op.Stop()
	}
	if s.rec != nil {
		s.rec.stop()
	}
	if s.Bed != nil {
		s.Close()
	}
}
