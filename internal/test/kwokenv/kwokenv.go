// Package kwokenv runs a simulated Kubernetes cluster for the special-resource-operator's
// end-to-end suite and benchmark: a real kube-apiserver and etcd (envtest, internal/test/testenv),
// a real kube-controller-manager (DaemonSet, garbage-collector, namespace and Job controllers) and
// kube-scheduler, and kwok (sigs.k8s.io/kwok) playing the kubelets of fake nodes. Nothing runs in
// a container: kwok moves pods to Running, deletes them when asked, and serves their logs from
// a file.
//
// kwok runs with the node and pod stages its module ships (kustomize/stage/node/fast and
// kustomize/stage/pod/fast), with the node stage changed so that each node reports the kernel
// the test gives it: the annotation KernelAnnotation is copied to status.nodeInfo.kernelVersion
// when the node starts and whenever it changes (the test's "reboot into another kernel"). The
// nodes report only an InternalIP address (127.0.0.1), so that the API server reaches kwok's
// kubelet endpoint for pod logs.
//
// The binaries come from KUBEBUILDER_ASSETS or <repo>/bin (make tools).
package kwokenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// KernelAnnotation on a node is the kernel kwok makes the node report.
const KernelAnnotation = "kwok.metalforge.io/kernel-version"

// Cluster is a running simulated cluster.
type Cluster struct {
	*testenv.Env
	// Dir holds the cluster's files (kwok configuration, certificates, logs of the processes).
	Dir string
	// LogFile is the file kwok serves as every driver container's log.
	LogFile string

	procs []*exec.Cmd
}

// Options tune the cluster.
type Options struct {
	// Logs are the lines kwok serves as the log of containers named LogContainer.
	Logs         string
	LogContainer string
}

// Start starts the API server, the controller manager, the scheduler and kwok.
func Start(opts Options) (*Cluster, error) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env}
	if err := c.start(opts); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(opts Options) error {
	dir, err := os.MkdirTemp("", "metalforge-kwok-")
	if err != nil {
		return fmt.Errorf("creating the cluster directory: %w", err)
	}
	c.Dir = dir
	bin, err := binDir()
	if err != nil {
		return err
	}
	kcm := []string{"--kubeconfig=" + c.KubeconfigPath, "--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath, "--leader-elect=false", "--secure-port=0",
		"--controllers=daemonset,garbagecollector,namespace,job,serviceaccount",
		"--use-service-account-credentials=false", "--concurrent-daemonset-syncs=10", "--kube-api-qps=500", "--kube-api-burst=1000"}
	if err := c.run(filepath.Join(bin, "kube-controller-manager"), "kube-controller-manager", kcm...); err != nil {
		return err
	}
	sched := []string{"--kubeconfig=" + c.KubeconfigPath, "--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath, "--leader-elect=false", "--secure-port=0", "--kube-api-qps=500", "--kube-api-burst=1000"}
	if err := c.run(filepath.Join(bin, "kube-scheduler"), "kube-scheduler", sched...); err != nil {
		return err
	}
	cfg, port, err := c.kwokConfig(opts)
	if err != nil {
		return err
	}
	cert, key, err := c.selfSigned()
	if err != nil {
		return err
	}
	kwok := []string{"--kubeconfig=" + c.KubeconfigPath, "--manage-all-nodes=true", "--config=" + cfg,
		"--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", port), fmt.Sprintf("--server-address=127.0.0.1:%d", port),
		"--tls-cert-file=" + cert, "--tls-private-key-file=" + key, "--cidr=10.0.0.0/8"}
	return c.run(filepath.Join(bin, "kwok"), "kwok", kwok...)
}

// binDir is where the binaries are: KUBEBUILDER_ASSETS, else <repo>/bin.
func binDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s not found in %s (KUBEBUILDER_ASSETS or <repo>/bin): run `make tools`: %w", name, dir, err)
		}
	}
	return dir, nil
}

// run starts a process whose output goes to <Dir>/<name>.log.
func (c *Cluster) run(path, name string, args ...string) error {
	out, err := os.Create(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return fmt.Errorf("creating the log of %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// Stop stops the processes (in reverse order) and the API server, and removes Dir.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if c.Env != nil {
		if err := c.Env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Dir != "" && os.Getenv("KWOKENV_KEEP") == "" {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	return errors.Join(errs...)
}

// ProcessLog is the output of one of the cluster's processes (for failure messages).
func (c *Cluster) ProcessLog(name string) string {
	data, _ := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	s := string(data)
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// Node is a fake node running kernel k, with labels.
func Node(name, kernel string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{KernelAnnotation: kernel, "kwok.x-k8s.io/node": "fake"}}}
}

// CreateNode creates a node and removes the not-ready taint the API server puts on new nodes:
// no node-lifecycle controller runs (it would need heartbeats from every node), so nothing else
// would.
func (c *Cluster) CreateNode(ctx context.Context, n *corev1.Node) error {
	if err := c.Client.Create(ctx, n); err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":null}}`))
	if err := c.Client.Patch(ctx, n, patch); err != nil {
		return fmt.Errorf("untainting node %s: %w", n.Name, err)
	}
	return nil
}

// kwokConfig writes kwok's configuration: the stages (node initialize as patched, the kernel
// stage, the module's fast pod stages) and the logs it serves. It returns the file and the port
// of kwok's kubelet endpoint.
func (c *Cluster) kwokConfig(opts Options) (string, int, error) {
	mod, err := kwokModuleDir()
	if err != nil {
		return "", 0, err
	}
	var docs []string
	initialize, err := os.ReadFile(filepath.Join(mod, "kustomize", "stage", "node", "fast", "node-initialize.yaml"))
	if err != nil {
		return "", 0, fmt.Errorf("reading kwok's node stage: %w", err)
	}
	patched, err := patchNodeInitialize(string(initialize))
	if err != nil {
		return "", 0, err
	}
	docs = append(docs, patched, nodeKernelStage)
	for _, f := range []string{"pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"} {
		data, err := os.ReadFile(filepath.Join(mod, "kustomize", "stage", "pod", "fast", f))
		if err != nil {
			return "", 0, fmt.Errorf("reading kwok's pod stage %s: %w", f, err)
		}
		docs = append(docs, string(data))
	}
	c.LogFile = filepath.Join(c.Dir, "driver.log")
	if err := os.WriteFile(c.LogFile, []byte(criLog(opts.Logs)), 0o600); err != nil {
		return "", 0, fmt.Errorf("writing the driver log: %w", err)
	}
	if opts.LogContainer != "" {
		docs = append(docs, fmt.Sprintf(clusterLogs, opts.LogContainer, c.LogFile))
	}
	path := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		return "", 0, fmt.Errorf("writing kwok's configuration: %w", err)
	}
	_, portStr, _ := net.SplitHostPort(loopback.FreeAddr())
	var port int
	if _, err := fmt.Sscanf(portStr, "%d", &port); err != nil {
		return "", 0, fmt.Errorf("parsing port %q: %w", portStr, err)
	}
	return path, port, nil
}

// criLog writes lines in the container runtime's log format, which kwok serves them from.
func criLog(text string) string {
	var b strings.Builder
	at := time.Now().UTC()
	for line := range strings.Lines(text) {
		fmt.Fprintf(&b, "%s stdout F %s\n", at.Format(time.RFC3339Nano), strings.TrimSuffix(line, "\n"))
	}
	return b.String()
}

// patchNodeInitialize makes kwok's node-initialize stage take the kernel from KernelAnnotation
// and report only the InternalIP address.
func patchNodeInitialize(stage string) (string, error) {
	const kernelLine = "kernelVersion: {{ or $nodeInfo.kernelVersion $kwokVersion }}"
	if !strings.Contains(stage, kernelLine) {
		return "", errors.New("kwok's node-initialize stage changed: no kernelVersion line to patch")
	}
	stage = strings.Replace(stage, kernelLine,
		`kernelVersion: {{ or (index .metadata.annotations "`+KernelAnnotation+`") $nodeInfo.kernelVersion $kwokVersion }}`, 1)
	const hostname = "{{ if not $hasHostname }}"
	if !strings.Contains(stage, hostname) {
		return "", errors.New("kwok's node-initialize stage changed: no Hostname address to drop")
	}
	// "$hasHostname = true" everywhere: the Hostname address is never added.
	stage = strings.Replace(stage, "{{ $hasHostname := false }}", "{{ $hasHostname := true }}", 1)
	return stage, nil
}

// nodeKernelStage reports a changed KernelAnnotation as the node's kernel (a reboot into it).
const nodeKernelStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-kernel
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.metadata.annotations["` + KernelAnnotation + `"] != null and .metadata.annotations["` + KernelAnnotation + `"] != .status.nodeInfo.kernelVersion'
      operator: 'In'
      values:
      - 'true'
  next:
    statusTemplate: |
      nodeInfo:
        kernelVersion: {{ index .metadata.annotations "` + KernelAnnotation + `" | Quote }}
`

// clusterLogs serves the log file as the log of every container with the given name.
const clusterLogs = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: driver-logs
spec:
  logs:
  - containers: [%q]
    logsFile: %q
    follow: false
`

// kwokModuleDir is the directory of the sigs.k8s.io/kwok module the tools module builds.
func kwokModuleDir() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	cmd.Dir = filepath.Join(root, "hack", "tools", "kwok")
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return "", fmt.Errorf("finding the kwok module (go list -m in hack/tools/kwok): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// selfSigned writes a certificate for kwok's kubelet endpoint (the API server does not verify
// kubelet certificates unless told to).
func (c *Cluster) selfSigned() (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating a key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kwok"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("creating a certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encoding the key: %w", err)
	}
	cert, keyPath := filepath.Join(c.Dir, "kwok.crt"), filepath.Join(c.Dir, "kwok.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing the certificate: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing the key: %w", err)
	}
	return cert, keyPath, nil
}
