package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metalforge/metalforge/internal/scheme"
)

// Options choose what Start sets up besides the API server and the CRDs.
type Options struct {
	// Webhooks installs the webhook configurations of config/webhook, rewritten to call
	// WebhookHost:WebhookPort with a CA that trusts the certificate in WebhookCertDir. The test
	// package starts its own webhook server there.
	Webhooks bool
	// AfterTests, when set, runs after every test of the package passed; an error it returns
	// fails the run. It is for checks over the whole suite, such as coverage of a table.
	AfterTests func() error
	// CRDPaths are more CRD files or directories to install (absolute, or relative to the
	// repository root): CRDs of other projects, or test-only ones.
	CRDPaths []string
	// WebhookPaths replace config/webhook as the webhook configurations installed with
	// Webhooks (relative to the repository root), for an operator with its own webhooks.
	WebhookPaths []string
	// NoProjectCRDs leaves config/crd/bases out (a test that installs them itself).
	NoProjectCRDs bool
	// APIServerFlags are more kube-apiserver flags (name without dashes → value).
	APIServerFlags map[string]string
}

// Env is a running API server with the project's CRDs installed.
type Env struct {
	// Config is an admin (system:masters) connection to the API server.
	Config *rest.Config
	// Client is a non-caching client with the project scheme: reads always see the latest state.
	Client client.Client
	// Scheme is the project scheme (built-in kinds and the project's API groups).
	Scheme *runtime.Scheme
	// KubeconfigPath is a kubeconfig file for kubectl and out-of-process binaries.
	KubeconfigPath string

	// WebhookHost, WebhookPort and WebhookCertDir (tls.crt, tls.key) are where a webhook server
	// must listen; set only with Options.Webhooks.
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string

	env    *envtest.Environment
	tmpDir string
	// apiServer is the kube-apiserver RestartAPIServer started, which envtest does not know.
	apiServer *apiServerProcess
}

// Start starts etcd and kube-apiserver, installs every CRD of config/crd/bases (and with
// opts.Webhooks the webhook configurations of config/webhook), and returns when they are served.
func Start(opts Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := binaryAssets(root)
	if err != nil {
		return nil, err
	}
	// controller-runtime warns (with a stack trace) when its logger is never set. Output goes to
	// stderr, which go test shows only for failing packages or with -v.
	ctrllog.SetLogger(funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{}))

	s := scheme.New()
	var env *envtest.Environment
	var cfg *rest.Config
	for attempt := 1; ; attempt++ {
		if env, cfg, err = startControlPlane(root, assets, s, opts); err == nil {
			break
		}
		err = fmt.Errorf("starting envtest (binaries from %s): %w", assets, err)
		if attempt == startAttempts {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "testenv: start %d of %d failed, trying again in %s: %v\n", attempt, startAttempts, startRetryWait, err)
		time.Sleep(startRetryWait)
	}
	e := &Env{Config: cfg, Scheme: s, env: env}
	if err := e.finish(opts); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// A control plane that fails to start is started again, a little later: envtest already retries
// at once with new ports, which does not help when the machine is short of something for a
// moment (the disk, on a shared CI machine: etcd exits at once when it cannot preallocate its
// log). A start that keeps failing says why (startFailure).
// (Variables for a test of a failing start.)
var (
	startAttempts  = 3
	startRetryWait = 15 * time.Second
)

// startControlPlane starts etcd and kube-apiserver once and installs the CRDs and webhooks.
func startControlPlane(root, assets string, s *runtime.Scheme, opts Options) (*envtest.Environment, *rest.Config, error) {
	etcdOut, apiServerOut := &startOutput{}, &startOutput{}
	env := &envtest.Environment{
		Scheme:                s,
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdPaths(root, opts),
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdOut, Err: etcdOut}
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Out, apiServer.Err = apiServerOut, apiServerOut
	if opts.Webhooks && len(opts.WebhookPaths) > 0 {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: fromRoot(root, opts.WebhookPaths)}
	} else if opts.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook")},
			// Until the first webhook marker exists, config/webhook has no manifests.
			IgnoreErrorIfPathMissing: true,
		}
	}
	for name, value := range opts.APIServerFlags {
		apiServer.Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		// A half-started control plane would leave etcd and kube-apiserver running.
		_ = env.Stop()
		return nil, nil, fmt.Errorf("%w%s", err, startFailure(etcdOut, apiServerOut))
	}
	etcdOut.running()
	apiServerOut.running()
	return env, cfg, nil
}

// fromRoot makes relative paths relative to the repository root.
func fromRoot(root string, paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		out = append(out, p)
	}
	return out
}

// crdPaths are the CRDs to install: config/crd/bases (unless NoProjectCRDs) and CRDPaths.
func crdPaths(root string, opts Options) []string {
	if opts.NoProjectCRDs {
		return fromRoot(root, opts.CRDPaths)
	}
	return append([]string{filepath.Join(root, "config", "crd", "bases")}, fromRoot(root, opts.CRDPaths)...)
}

func (e *Env) finish(opts Options) error {
	c, err := client.New(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	e.Client = c

	e.tmpDir, err = os.MkdirTemp("", "metalforge-testenv-")
	if err != nil {
		return fmt.Errorf("creating temporary directory: %w", err)
	}
	e.KubeconfigPath = filepath.Join(e.tmpDir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}

	if opts.Webhooks {
		w := e.env.WebhookInstallOptions
		e.WebhookHost, e.WebhookPort, e.WebhookCertDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
	}
	return nil
}

// Stop stops the API server and etcd and removes temporary files.
func (e *Env) Stop() error {
	var errs []error
	if err := e.stopRestarted(); err != nil {
		errs = append(errs, err)
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping envtest: %w", err))
		}
	}
	if e.tmpDir != "" {
		if err := os.RemoveAll(e.tmpDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Namespace creates a namespace named after the test, with a random suffix, and deletes it when
// the test ends. (envtest runs no namespace controller: the namespace stays Terminating and its
// objects stay, which is harmless because every test uses a fresh one.)
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(t.Name())}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		if err := e.Client.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9]+`)

// namespaceName makes a DNS label from a test name: lower case, at most 63 characters, unique.
func namespaceName(testName string) string {
	base := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	const suffixLen = 6
	if maxBase := 63 - 1 - suffixLen; len(base) > maxBase {
		base = strings.TrimRight(base[:maxBase], "-")
	}
	if base == "" {
		base = "test"
	}
	return base + "-" + randomSuffix(suffixLen)
}

func randomSuffix(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)[:n]
}

// fuzzing reports whether the test binary runs as a fuzzing coordinator or worker.
func fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// Main is the body of a TestMain: it starts one Env for the package, stores it in *env, runs the
// tests, stops the Env and exits with the tests' status.
func Main(m *testing.M, opts Options, env **Env) {
	os.Exit(run(m, opts, env))
}

func run(m *testing.M, opts Options, env **Env) int {
	if fuzzing() {
		// A fuzz run (`go test -run '^$' -fuzz ...`) runs no test that needs the API server, and
		// its coordinator and every worker process come through here: starting one API server
		// each would only cost time and memory. Fuzz targets in a package with an Env must not
		// use it.
		return m.Run()
	}
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if code == 0 && opts.AfterTests != nil {
		if err := opts.AfterTests(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = 1
		}
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
