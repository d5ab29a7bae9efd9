// Package images runs per-host agent images end to end: a real API server (envtest's
// kube-apiserver + etcd from bin/), a real Ironic (hack/ironic-up.sh, an instance of its own),
// bmcsim with its agents in this process, bin/baremetal-operator with --build-preprov-image and
// --external-preprov-image-builder, and bin/image-customization-controller on a CoreOS-layout base
// ISO, both as subprocesses. Each host has its own static nmstate network data; the tests drive
// everything through the Kubernetes API and check that every host's agent came up with the address
// from its network data (Ironic's inspection, the host's HardwareData).
package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/sharedsuite"
	"github.com/metalforge/metalforge/internal/test/subprocess"
)

// servers is how many simulated servers the tests share.
const servers = 6

// ironicConf shortens Ironic's checks to the simulator's pace.
const ironicConf = `
[conductor]
check_provision_state_interval = 5
deploy_callback_timeout = 60
inspect_wait_timeout = 300

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 30
`

type suite struct {
	*ironicenv.Bed
	c   client.Client
	op  *subprocess.Process
	icc *subprocess.Process
	// publish is the controller's image server.
	publish string
	// dir holds the binaries, base images and logs; removed after a run that passed.
	dir string
}

// theSuite starts on first use; TestMain stops it.
var theSuite = &sharedsuite.Suite[*suite]{
	Name: "end-to-end", Unavailable: unavailable, Start: startSuite, Stop: (*suite).stop,
}

func TestMain(m *testing.M) {
	code, s, ran, _ := theSuite.Main(m, "16")
	if ran {
		if code == 0 {
			_ = os.RemoveAll(s.dir)
		} else {
			fmt.Fprintln(os.Stderr, "e2e images: logs kept in", s.dir)
		}
	}
	os.Exit(code)
}

// unavailable adds nmcli, which checks each host's network data, to Ironic's needs.
func unavailable() string {
	if why := ironicenv.Unavailable(); why != "" {
		return why
	}
	if _, err := exec.LookPath("nmcli"); err != nil {
		return "nmcli is not installed; `make test` installs it (hack/host-packages.sh, Debian network-manager)"
	}
	return ""
}

func e2e(t *testing.T) *suite {
	t.Helper()
	return theSuite.Get(t)
}

func startSuite() (s *suite, err error) {
	s = &suite{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	dir, err := os.MkdirTemp("", "metalforge-e2e-images-")
	if err != nil {
		return s, err
	}
	s.dir = dir
	bins := map[string]string{}
	s.Bed, err = ironicenv.StartBed(ironicenv.BedOptions{
		Ironic: ironicenv.Options{
			Instance: fmt.Sprintf("e2e-images-%d", os.Getpid()), ExtraConf: ironicConf, WipeDB: true, OwnerPID: os.Getpid(),
			MemoizeKeyDerivation: true,
		},
		Servers: servers,
		Build:   func() error { return build(dir, bins) },
	})
	if err != nil {
		return s, err
	}
	s.c = s.Kube.Client

	// The base images: a CoreOS-layout live ISO, its initramfs and kernel.
	base := filepath.Join(dir, "ironic-python-agent.iso")
	if err := deployimage.WriteLiveISO(base, deployimage.LiveOptions{}); err != nil {
		return s, err
	}
	initrd, kernel := filepath.Join(dir, "ironic-python-agent.initramfs"), filepath.Join(dir, "ironic-python-agent.kernel")
	if err := errors.Join(os.WriteFile(initrd, deployimage.LiveInitramfs(), 0o644), os.WriteFile(kernel, deployimage.Kernel(), 0o644)); err != nil {
		return s, err
	}
	addr, probe := loopback.FreeAddr(), loopback.FreeAddr()
	s.publish = "http://" + addr
	s.icc, err = subprocess.Start("icc", bins["icc"], dir, subprocess.Options{Env: []string{
		"KUBECONFIG=" + s.Kube.KubeconfigPath, "DEPLOY_ISO=" + base, "DEPLOY_INITRD=" + initrd, "DEPLOY_KERNEL=" + kernel,
		"IRONIC_BASE_URL=" + s.Ironic.URL(), "IRONIC_AGENT_IMAGE=quay.io/metal3-io/ironic-agent",
	}}, "-images-bind-addr="+addr, "-images-publish-addr="+s.publish, "-work-dir="+filepath.Join(dir, "icc-work"),
		"-grace-period=1s", "-health-probe-bind-address="+probe, "-v=2")
	if err != nil {
		return s, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.icc.WaitHTTP(ctx, "http://"+probe+"/readyz"); err != nil {
		return s, err
	}
	opProbe := loopback.FreeAddr()
	s.op, err = subprocess.Start("operator", bins["operator"], dir, subprocess.Options{Env: append([]string{
		"KUBECONFIG=" + s.Kube.KubeconfigPath, "METAL3_AUTH_ROOT_DIR=" + filepath.Join(dir, "no-auth"),
	}, s.Ironic.OperatorEnv()...)},
		"--provisioner=ironic", "--webhook-port=0", "--build-preprov-image", "--external-preprov-image-builder",
		"--metrics-bind-address=0", "--health-probe-bind-address="+opProbe,
		"--error-backoff-base=2s", "--power-poll-interval=5s", "--provisioner-unavailable-delay=3s",
		"--ironic-short-poll=1s", "--ironic-long-poll=3s", "-v=2")
	if err != nil {
		return s, err
	}
	return s, s.op.WaitHTTP(ctx, "http://"+opProbe+"/readyz")
}

// build builds the operator and the controller into dir (E2E_OPERATOR and E2E_ICC name binaries
// to use instead). Not into bin/: test/e2e builds and runs bin/baremetal-operator at the same
// time under `go test ./...`.
func build(dir string, bins map[string]string) error {
	root := ironicenv.RepoRoot()
	for _, b := range []struct{ key, pkg, env string }{
		{"operator", "baremetal-operator", "E2E_OPERATOR"},
		{"icc", "image-customization-controller", "E2E_ICC"},
	} {
		key, pkg := b.key, b.pkg
		if given := os.Getenv(b.env); given != "" {
			bins[key] = given
			continue
		}
		out := filepath.Join(dir, pkg)
		cmd := exec.Command("go", "build", "-o", out, "./cmd/"+pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
		}
		bins[key] = out
	}
	return nil
}

func (s *suite) stop() {
	for _, p := range []*subprocess.Process{s.op, s.icc} {
		if p != nil {
			p.Stop()
		}
	}
	if s.Bed != nil {
		s.Close()
	}
}
