package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot is the directory holding the module's go.mod, found by walking up from the working
// directory (go test runs each package in its own directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// binaryAssets returns the directory with kube-apiserver and etcd: KUBEBUILDER_ASSETS when set,
// else <root>/bin. It fails with a hint when a binary is missing, rather than letting envtest
// fail later with a less obvious message.
func binaryAssets(root string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s not found in %s (KUBEBUILDER_ASSETS or <repo>/bin): run `make tools` to build it: %w", name, dir, err)
		}
	}
	return dir, nil
}

// ModuleDir is the directory of a module the project requires (go list -m), for tests that
// install files shipped in a dependency, such as the CRD manifests of github.com/openshift/api.
func ModuleDir(modulePath string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", modulePath)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding module %s (go list -m): %w", modulePath, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded (run go mod download)", modulePath)
	}
	return dir, nil
}

// BuildOperator builds ./cmd/baremetal-operator into <root>/bin (the benchmarks and the
// end-to-end suite run the binary as a subprocess) and returns its path; the compiler's output
// goes to w.
func BuildOperator(w io.Writer) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "bin", "baremetal-operator")
	build := exec.Command("go", "build", "-o", out, "./cmd/baremetal-operator")
	build.Dir, build.Stdout, build.Stderr = root, w, w
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building the operator: %w", err)
	}
	return out, nil
}

// OpenShiftCRDs returns the paths of CRD manifests shipped by the github.com/openshift/api module
// in go.mod (config/v1/zz_generated.crd-manifests), by file name, e.g.
// "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml".
func OpenShiftCRDs(files ...string) ([]string, error) {
	mod, err := ModuleDir("github.com/openshift/api")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mod, "config", "v1", "zz_generated.crd-manifests")
	paths := make([]string, 0, len(files))
	for _, f := range files {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("OpenShift CRD %s: %w", f, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Tool returns the path of a tool built into the tools directory (KUBEBUILDER_ASSETS or <repo>/bin),
// e.g. kubectl, failing with a hint when it is missing.
func Tool(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in %s (KUBEBUILDER_ASSETS or <repo>/bin): run `make tools` to build it: %w", name, dir, err)
	}
	return p, nil
}
