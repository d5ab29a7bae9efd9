// Command images benchmarks the image-customization-controller: it starts a real API server (the
// bin/kube-apiserver and bin/etcd envtest runs), runs bin/image-customization-controller as a
// subprocess on a CoreOS-layout base ISO of about 1 GiB, creates N PreprovisioningImages at once
// (each with its own static nmstate network data) and reports
//
//   - the time until all N are Ready, and until all have their sha256 annotation (computed in
//     the background: each ISO's checksum reads the GiB after its embed area);
//   - the throughput of C concurrent full downloads of C different images against C concurrent
//     `cat` of the base ISO read through a pipe (the same bytes out of the page cache, without
//     HTTP) and against C downloads of the base from a plain static file server, and the
//     controller's RSS while they run, for 1, 8 and C downloads.
//
// It measures; it never fails on a figure. Run it with `make bench-images`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

type options struct {
	n           int
	downloads   int
	baseSize    int64
	icc         string
	concurrency int
	cacheDir    string
	rounds      int
	timeout     time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 100, "PreprovisioningImages to create.")
	flag.IntVar(&o.downloads, "downloads", 32, "Concurrent downloads (at most n).")
	flag.Int64Var(&o.baseSize, "base-mib", 1024, "Size of the base ISO in MiB.")
	flag.StringVar(&o.icc, "icc", "", "Controller binary (default: build ./cmd/image-customization-controller into bin/).")
	flag.IntVar(&o.concurrency, "concurrency", 0, "Controller -concurrency (0: its default).")
	flag.IntVar(&o.rounds, "rounds", 3, "Download rounds per count (interleaved; medians reported).")
	flag.StringVar(&o.cacheDir, "cache", "", "Where the base ISO is kept between runs (default: .cache/bench-images).")
	readKiB := flag.Int("read-kib", readBuffer>>10, "Read buffer of each download stream, in KiB.")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "Give up after this long.")
	flag.Parse()
	readBuffer = *readKiB << 10
	o.downloads = min(o.downloads, o.n)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-images:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if o.cacheDir == "" {
		o.cacheDir = filepath.Join(root, ".cache", "bench-images")
	}
	if o.icc == "" {
		o.icc = filepath.Join(root, "bin", "image-customization-controller")
		fmt.Println("building", o.icc)
		build := exec.Command("go", "build", "-o", o.icc, "./cmd/image-customization-controller")
		build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the controller: %w", err)
		}
	}
	base, err := baseISO(o.cacheDir, o.baseSize<<20)
	if err != nil {
		return err
	}
	st, err := os.Stat(base)
	if err != nil {
		return err
	}
	fmt.Printf("base ISO %s (%.2f GiB)\n", base, float64(st.Size())/(1<<30))

	fmt.Println("starting kube-apiserver and etcd")
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	const ns = "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}

	work, err := os.MkdirTemp("", "bench-images-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	imagesAddr, probeAddr := loopback.FreeAddr(), loopback.FreeAddr()
	args := []string{"-images-bind-addr=" + imagesAddr, "-images-publish-addr=http://" + imagesAddr, "-work-dir=" + work,
		"-grace-period=0", "-namespace=" + ns, "-health-probe-bind-address=" + probeAddr, "-v=0"}
	if o.concurrency > 0 {
		args = append(args, fmt.Sprintf("-concurrency=%d", o.concurrency))
	}
	logPath := filepath.Join(os.TempDir(), "bench-images-icc.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	icc := exec.Command(o.icc, args...)
	icc.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath, "DEPLOY_ISO="+base,
		"IRONIC_BASE_URL=http://192.0.2.2:6385", "IRONIC_AGENT_IMAGE=quay.io/metal3-io/ironic-agent")
	icc.Stdout, icc.Stderr = logFile, logFile
	startICC := time.Now()
	if err := icc.Start(); err != nil {
		return fmt.Errorf("starting the controller: %w", err)
	}
	defer func() {
		_ = icc.Process.Signal(syscall.SIGTERM)
		_ = icc.Wait()
	}()
	if err := loopback.WaitOK(ctx, "http://"+probeAddr+"/readyz"); err != nil {
		return fmt.Errorf("controller not ready (log: %s): %w", logPath, err)
	}
	pid := icc.Process.Pid
	fmt.Printf("controller ready in %.1f s (pid %d, %s), log %s\n", time.Since(startICC).Seconds(), pid, strings.Join(args, " "), logPath)

	b, err := buildImages(ctx, env.Config, ns, o.n)
	if err != nil {
		return err
	}
	rssBuilt := procstat.PeakRSS(pid)
	fmt.Printf("all %d Ready in %.1f s; all checksums in %.1f s\n", o.n, b.ready.Seconds(), b.summed.Seconds())

	if err := verifyOne(ctx, b.images[0]); err != nil {
		return err
	}
	var counts []int
	for _, c := range []int{1, 8, o.downloads} {
		if c <= o.downloads && (len(counts) == 0 || c > counts[len(counts)-1]) {
			counts = append(counts, c)
		}
	}
	staticURL, stopStatic, err := staticServer(ctx, root, base)
	if err != nil {
		return err
	}
	defer stopStatic()
	results, err := downloads(ctx, base, staticURL, b.images, pid, counts, o.rounds)
	if err != nil {
		return err
	}
	report(o, st.Size(), b, results, rssBuilt, procstat.CPUSeconds(pid))
	return nil
}

// staticServer serves the base ISO's directory with hack/deployimage serve (a static file server
// like Ironic's httpd: no overlay, sendfile) and returns the base's URL.
func staticServer(ctx context.Context, root, base string) (string, func(), error) {
	bin := filepath.Join(os.TempDir(), "bench-images-deployimage")
	build := exec.Command("go", "build", "-o", bin, "./hack/deployimage")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return "", nil, fmt.Errorf("building hack/deployimage: %w", err)
	}
	addr := loopback.FreeAddr()
	srv := exec.CommandContext(ctx, bin, "serve", "--root", filepath.Dir(base), "--listen", addr)
	if err := srv.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = srv.Process.Kill(); _ = srv.Wait() }
	url := "http://" + addr + "/" + filepath.Base(base)
	if err := loopback.WaitOK(ctx, url); err != nil {
		stop()
		return "", nil, err
	}
	return url, stop, nil
}
