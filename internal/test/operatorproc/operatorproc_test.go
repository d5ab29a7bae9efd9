package operatorproc

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// When this variable is set, the test binary plays the operator: it serves /readyz and /metrics
// on the addresses Start gives it, prints its arguments and blocks (Start runs the test binary
// itself as the "operator").
const fakeOperatorEnv = "OPERATORPROC_FAKE_OPERATOR"

func TestMain(m *testing.M) {
	if os.Getenv(fakeOperatorEnv) == "" {
		os.Exit(m.Run())
	}
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	metrics := fs.String("metrics-bind-address", "", "")
	probe := fs.String("health-probe-bind-address", "", "")
	fs.String("extra", "", "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	fmt.Println("fake operator started with", strings.Join(os.Args[1:], " "))
	probeMux := http.NewServeMux()
	probeMux.HandleFunc("/readyz", func(http.ResponseWriter, *http.Request) {})
	go func() { _ = http.ListenAndServe(*probe, probeMux) }() //nolint:gosec // test-only fake
	metricsMux := http.NewServeMux()
	metricsMux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `# HELP x`)
		fmt.Fprintln(w, `reconciles_total{controller="host",result="success"} 3`)
		fmt.Fprintln(w, `reconciles_total{controller="host",result="error"} 2`)
		fmt.Fprintln(w, `reconciles_total{controller="image",result="success"} 1`)
		fmt.Fprintln(w, `reconciles_total_other{controller="host"} 100`)
		fmt.Fprintln(w, `requests_total{sub_operation="x",operation="get"} 4`)
		fmt.Fprintln(w, `plain 7`)
	})
	_ = http.ListenAndServe(*metrics, metricsMux) //nolint:gosec // test-only fake
}

func TestStartKillStartAgain(t *testing.T) {
	log := filepath.Join(t.TempDir(), "operator.log")
	ctx := context.Background()
	p, err := Start(ctx, Options{Binary: os.Args[0], Args: []string{"--extra=1"}, Env: []string{fakeOperatorEnv + "=1"}, LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	first, metrics, probe := p.Pid(), p.Metrics, p.Probe
	p.Kill()
	if p.Running() {
		t.Fatal("Running after Kill")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("starting again: %v", err)
	}
	if p.Pid() == first || p.Metrics != metrics || p.Probe != probe || !p.Running() {
		t.Errorf("after the restart: pid %d (was %d), addresses %s %s (were %s %s), running %v",
			p.Pid(), first, p.Metrics, p.Probe, metrics, probe, p.Running())
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "fake operator started with --metrics-bind-address="+metrics); n != 2 {
		t.Errorf("log has %d starts, want both appended:\n%s", n, b)
	}

	got, err := p.Scrape(ctx, "reconciles_total", "controller")
	if err != nil {
		t.Fatal(err)
	}
	if got["host"] != 5 || got["image"] != 1 || len(got) != 2 {
		t.Errorf("reconciles_total by controller = %v, want host 5 (both results), image 1, no other metric", got)
	}
	ops, err := p.Scrape(ctx, "requests_total", "operation")
	if err != nil {
		t.Fatal(err)
	}
	if ops["get"] != 4 || len(ops) != 1 {
		t.Errorf("requests_total by operation = %v, want get 4 (not fooled by sub_operation)", ops)
	}
	plain, err := p.Scrape(ctx, "plain", "controller")
	if err != nil {
		t.Fatal(err)
	}
	if plain[""] != 7 {
		t.Errorf("a metric without labels = %v, want 7 under \"\"", plain)
	}
}

func TestStartReportsAnEarlyExit(t *testing.T) {
	log := filepath.Join(t.TempDir(), "operator.log")
	// Without the fake's variable the test binary rejects the operator's flags and exits at once,
	// like an operator that fails at start.
	_, err := Start(context.Background(), Options{Binary: os.Args[0], LogPath: log})
	if err == nil || !strings.Contains(err.Error(), "exited at start") {
		t.Errorf("Start of a process that exits = %v, want an error saying it exited", err)
	}
}
