package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalforge/metalforge/internal/test/procstat"
)

type result struct {
	count int
	// bytes per second, all streams together: the controller, cat through a pipe, and a plain
	// static file server (hack/deployimage serve: Go's http.ServeContent of the *os.File, which
	// sends with sendfile too) of the base ISO
	icc, cat, static float64
	// rss is the controller's largest resident set size sampled during its downloads (every
	// round); rssBefore just before the first.
	rss, rssBefore int64
	cpu            float64 // controller CPU seconds during one round of its downloads (median)
}

// discard is io.Discard without ReadFrom, so that the copy uses our large buffer.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// readBuffer is the size of each stream's read buffer (-read-kib): every stream, cat's pipe and
// both servers' sockets alike, is read into one such buffer.
var readBuffer = 1 << 20

var httpClient = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 64, DisableCompression: true}}

// verifyOne downloads one image and checks it against its checksum annotation.
func verifyOne(ctx context.Context, img image) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, img.url, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(struct{ io.Writer }{h}, resp.Body, make([]byte, 1<<20)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.HasPrefix(img.sum, got+"  ") {
		return fmt.Errorf("%s: sha256 %s, annotation %q", img.url, got, img.sum)
	}
	fmt.Println("one download checked against its checksum annotation")
	return nil
}

// downloads measures, for each count, count concurrent `cat base` through pipes, count concurrent
// downloads of the base from a static file server and count concurrent downloads of different
// images from the controller, sampling the controller's RSS meanwhile. Each is run rounds times,
// interleaved, and the median kept: the machine is shared, and a burst of other work lands on
// one method or another.
func downloads(ctx context.Context, base, staticURL string, images []image, pid int, counts []int, rounds int) ([]result, error) {
	if _, err := streams(1, func(int) (io.ReadCloser, func() error, error) { return catStream(ctx, base) }); err != nil {
		return nil, err // warms the page cache
	}
	var out []result
	for _, n := range counts {
		r := result{count: n}
		var cats, statics, iccs, cpus []float64
		for round := range rounds {
			cat, err := streams(n, func(int) (io.ReadCloser, func() error, error) { return catStream(ctx, base) })
			if err != nil {
				return nil, err
			}
			static, err := streams(n, func(int) (io.ReadCloser, func() error, error) { return httpStream(ctx, staticURL) })
			if err != nil {
				return nil, err
			}
			if round == 0 {
				r.rssBefore = procstat.RSS(pid)
			}
			cpu0 := procstat.CPUSeconds(pid)
			stop := sample(pid, &r.rss)
			icc, err := streams(n, func(i int) (io.ReadCloser, func() error, error) { return httpStream(ctx, images[i].url) })
			stop()
			if err != nil {
				return nil, err
			}
			cats, statics, iccs = append(cats, cat), append(statics, static), append(iccs, icc)
			cpus = append(cpus, procstat.CPUSeconds(pid)-cpu0)
			fmt.Printf("  %2d streams, round %d: cat %.0f MiB/s, static server %.0f MiB/s, controller %.0f MiB/s, controller RSS %d MiB\n",
				n, round+1, cat/(1<<20), static/(1<<20), icc/(1<<20), r.rss>>20)
		}
		r.cat, r.static, r.icc, r.cpu = median(cats), median(statics), median(iccs), median(cpus)
		out = append(out, r)
	}
	return out, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// streams reads n streams to the end at once and returns their total bytes per second.
func streams(n int, open func(i int) (io.ReadCloser, func() error, error)) (float64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			rc, wait, err := open(i)
			if err != nil {
				errs <- err
				return
			}
			k, err := io.CopyBuffer(discard{}, rc, make([]byte, readBuffer))
			rc.Close()
			if werr := wait(); err == nil {
				err = werr
			}
			total.Add(k)
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(total.Load()) / wall.Seconds(), nil
}

func catStream(ctx context.Context, path string) (io.ReadCloser, func() error, error) {
	cmd := exec.CommandContext(ctx, "cat", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return out, cmd.Wait, nil
}

func httpStream(ctx context.Context, url string) (io.ReadCloser, func() error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, func() error { return nil }, nil
}

// sample records the largest RSS of pid into *max every 20 ms until stop is called.
func sample(pid int, max *int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if r := procstat.RSS(pid); r > *max {
				*max = r
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
