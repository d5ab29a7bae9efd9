// Command bmcsim-bench measures bmcsim at scale: it starts the bmcsim binary with many servers,
// GETs every server's System once, reads the process's resident memory from /proc, then times GETs
// of random Systems and prints the latency percentiles. It measures; it never fails on a figure.
//
//	go run ./hack/bmcsim-bench -bmcsim bin/bmcsim -hosts 1000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

type entry struct {
	Name       string `json:"name"`
	BMCAddress string `json:"bmcAddress"`
	Username   string `json:"username"`
	Password   string `json:"password"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bmcsim-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bmcsim", "bin/bmcsim", "bmcsim binary")
	hosts := flag.Int("hosts", 1000, "simulated servers")
	requests := flag.Int("requests", 20000, "timed GETs of random Systems")
	concurrency := flag.Int("concurrency", 4, "parallel clients for the timed GETs")
	flag.Parse()

	dir, err := os.MkdirTemp("", "bmcsim-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	inv := filepath.Join(dir, "inventory.json")
	cmd := exec.Command(*bin, "--hosts", fmt.Sprint(*hosts), "--listen", "127.0.0.1:0", "--inventory", inv,
		"--no-agent", "--quiet", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", *bin, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	entries, err := waitInventory(inv, 60*time.Second)
	if err != nil {
		return err
	}
	ready := time.Since(start)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency * 2}, Timeout: 30 * time.Second}
	base, paths := split(entries)

	// Every server answers once before memory is read.
	errs := parallel(*concurrency, len(entries), func(i int) error {
		_, err := get(client, base, paths[i], entries[i])
		return err
	})
	if errs > 0 {
		return fmt.Errorf("%d of %d first GETs failed", errs, len(entries))
	}
	rss, hwm, err := memory(cmd.Process.Pid)
	if err != nil {
		return err
	}

	lat := make([]time.Duration, *requests)
	t0 := time.Now()
	errs = parallel(*concurrency, *requests, func(i int) error {
		j := rand.IntN(len(entries))
		d, err := get(client, base, paths[j], entries[j])
		lat[i] = d
		return err
	})
	wall := time.Since(t0)
	rssAfter, hwmAfter, err := memory(cmd.Process.Pid)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }

	fmt.Printf("bmcsim benchmark: %d servers, one process, one listener\n", *hosts)
	fmt.Printf("  start until inventory written:    %v\n", ready.Round(time.Millisecond))
	fmt.Printf("  RSS after every System GET once:  %.1f MiB (peak %.1f MiB)\n", mib(rss), mib(hwm))
	fmt.Printf("  RSS after the timed GETs:         %.1f MiB (peak %.1f MiB)\n", mib(rssAfter), mib(hwmAfter))
	fmt.Printf("  GET /redfish/v1/Systems/<id> (basic auth, %d requests, %d clients, %d errors):\n", *requests, *concurrency, errs)
	fmt.Printf("    p50 %v  p90 %v  p99 %v  max %v  (%.0f requests/s)\n",
		pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		lat[len(lat)-1].Round(time.Microsecond), float64(*requests)/wall.Seconds())
	return nil
}

func waitInventory(path string, timeout time.Duration) ([]entry, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(path)
		if err == nil {
			var e []entry
			if err := json.Unmarshal(data, &e); err != nil {
				return nil, fmt.Errorf("parsing the inventory: %w", err)
			}
			return e, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.New("bmcsim did not write its inventory in time")
}

// split turns redfish-virtualmedia+http://host:port/redfish/v1/Systems/<id> into the base URL and
// the path.
func split(entries []entry) (string, []string) {
	var base string
	paths := make([]string, len(entries))
	for i, e := range entries {
		rest := strings.TrimPrefix(e.BMCAddress, "redfish-virtualmedia+http://")
		slash := strings.Index(rest, "/")
		base, paths[i] = "http://"+rest[:slash], rest[slash:]
	}
	return base, paths
}

func get(c *http.Client, base, path string, e entry) (time.Duration, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(e.Username, e.Password)
	t := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(t)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return d, err
}

// parallel runs fn(0..n-1) on workers goroutines and counts errors.
func parallel(workers, n int, fn func(i int) error) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	next, errs := 0, 0
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// memory reads VmRSS and VmHWM (peak RSS) of a process, in bytes.
func memory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("reading memory of bmcsim: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		switch {
		case strings.HasPrefix(sc.Text(), "VmRSS:"):
			_, err = fmt.Sscanf(strings.TrimPrefix(sc.Text(), "VmRSS:"), "%d", &kb)
			rss = kb << 10
		case strings.HasPrefix(sc.Text(), "VmHWM:"):
			_, err = fmt.Sscanf(strings.TrimPrefix(sc.Text(), "VmHWM:"), "%d", &kb)
			hwm = kb << 10
		}
		if err != nil {
			return 0, 0, fmt.Errorf("parsing /proc/%d/status: %w", pid, err)
		}
	}
	return rss, hwm, sc.Err()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
