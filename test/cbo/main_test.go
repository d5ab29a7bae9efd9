// Package cbo is the cluster-baremetal-operator's end-to-end test. It installs the release
// manifests on a real API server (envtest), runs the operator's own Deployment from them, lets it
// render the stack, and runs every pod of the namespace as processes (internal/test/kubelet) with
// exactly the commands, arguments and environment of the Deployments: the operator and the
// baremetal-operator from the images `make images` builds, Ironic from the Debian root
// hack/ironic-up.sh builds with the Ironic runner layered on top. A bmcsim server is then
// provisioned through that stack, with the credentials and the TLS certificate the operator made,
// and the ClusterOperator must report DeployComplete.
//
// Everything runs in a network namespace of the test's own (unshare --net): the stack's fixed
// ports (6385, 6180, 9443, ...) cannot clash with anything on the machine, and the node and pod
// addresses are ordinary addresses on its loopback interface, which EndpointSlices accept (the
// API server reaches the webhooks through them). The test binary prepares the images first,
// outside (it may need the module cache's network), then runs again inside. Needs root and the
// Ironic root (make ironic-root); skips otherwise, saying why.
package cbo

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/metalforge/metalforge/internal/images"
	"github.com/metalforge/metalforge/internal/release"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/kubelet"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// artifactsEnv names the file describing the prepared images, in the network namespace run.
const artifactsEnv = "METALFORGE_CBO_E2E_ARTIFACTS"

// artifacts are the image directories the outer run prepared.
type artifacts struct {
	Operator, BMO, Runner, ESP, CopyMetal, IronicRoot string
	// ICC is the image-customization-controller's image (with the machine's nmcli).
	ICC string
}

var (
	prepared   *artifacts
	skipReason string
)

func TestMain(m *testing.M) {
	kubelet.MaybeInit()
	flag.Parse()
	if path := os.Getenv(artifactsEnv); path != "" {
		// Inside the network namespace.
		data, err := os.ReadFile(path)
		if err == nil {
			prepared = &artifacts{}
			err = json.Unmarshal(data, prepared)
		}
		if err == nil {
			err = setupNetwork()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cbo e2e: %v\n", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if skipReason = unavailable(); skipReason != "" {
		os.Exit(m.Run()) // every test skips with the reason
	}
	os.Exit(outer(m))
}

// unavailable says why the test cannot run here ("" when it can).
func unavailable() string {
	if testing.Short() {
		return "end-to-end: skipped with -short"
	}
	if why := ironicenv.Unavailable(); why != "" {
		return "end-to-end: " + why
	}
	if !ironicenv.RootReady() {
		return "end-to-end: the Ironic root is not built (make ironic-root)"
	}
	for _, tool := range []string{"unshare", "ip", "nmcli", "ldd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "end-to-end: " + tool + " is not installed (util-linux, iproute2, network-manager, libc-bin; hack/host-packages.sh)"
		}
	}
	return ""
}

// outer prepares the images and runs the test binary again in a new network namespace.
func outer(m *testing.M) int {
	dir, err := os.MkdirTemp("", "metalforge-cbo-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	a, err := prepare(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cbo e2e: preparing the images: %v\n", err)
		return 1
	}
	data, _ := json.Marshal(a)
	path := filepath.Join(dir, "artifacts.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--", self}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), artifactsEnv+"="+path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok { //nolint:errorlint // the exit code of this very command
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = m
	return 0
}

// prepare builds the images (as `make images` does) and unpacks them, builds the machine OS
// images stand-in, and writes the EFI system partition layer of the Ironic image.
func prepare(dir string) (*artifacts, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	manifests, err := release.ReadDir(filepath.Join(root, "manifests"))
	if err != nil {
		return nil, err
	}
	layouts, err := images.Build(context.Background(), root, filepath.Join(dir, "oci"), images.Specs(manifests))
	if err != nil {
		return nil, err
	}
	a := &artifacts{IronicRoot: filepath.Join(ironicenv.CacheDir(), "root")}
	for name, dst := range map[string]*string{"cluster-baremetal-operator": &a.Operator, "baremetal-operator": &a.BMO, "ironic-runner": &a.Runner,
		"image-customization-controller": &a.ICC} {
		*dst = filepath.Join(dir, "rootfs", name)
		if err := images.Extract(layouts[name], *dst); err != nil {
			return nil, fmt.Errorf("unpacking %s: %w", name, err)
		}
	}
	a.CopyMetal = filepath.Join(dir, "rootfs", "machine-os-images")
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(a.CopyMetal, "bin", "copy-metal"), "./test/cbo/copymetal")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building copy-metal: %w\n%s", err, b)
	}
	// A zero-filled EFI system partition: bmcsim boots the ISO Ironic builds without looking at
	// it (a real Ironic image carries a real one).
	a.ESP = filepath.Join(dir, "rootfs", "esp")
	esp := filepath.Join(a.ESP, "usr", "share", "ironic-runner", "esp.img")
	if err := os.MkdirAll(filepath.Dir(esp), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(esp, make([]byte, 4<<20), 0o644); err != nil { //nolint:gosec // an image
		return nil, err
	}
	return a, nil
}

// Addresses inside the network namespace: the node's, and the pods' (not host-network).
const nodeIP = "192.168.111.10"

var podIPs = []string{"10.128.0.10", "10.128.0.11", "10.128.0.12", "10.128.0.13", "10.128.0.14", "10.128.0.15",
	"10.128.0.16", "10.128.0.17", "10.128.0.18", "10.128.0.19"}

func setupNetwork() error {
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", nodeIP + "/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}
