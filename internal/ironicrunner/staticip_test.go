package ironicrunner

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStaticIPArgs(t *testing.T) {
	c := Config{ProvisioningIP: netip.MustParseAddr("172.22.0.3"), Prefix: 24}
	got, err := StaticIPArgs(c, "eth1", StaticIPLifetime)
	if err != nil || strings.Join(got, " ") != "addr replace 172.22.0.3/24 dev eth1 valid_lft 10 preferred_lft 10" {
		t.Fatalf("%v %v", got, err)
	}
	if got, _ := StaticIPDeleteArgs(c, "eth1"); strings.Join(got, " ") != "addr del 172.22.0.3/24 dev eth1" {
		t.Errorf("delete: %v", got)
	}
	if _, err := StaticIPArgs(Config{ProvisioningIP: netip.MustParseAddr("172.22.0.3")}, "eth1", 0); err == nil {
		t.Error("an address without a prefix was accepted")
	}
}

// ipRecorder is a fake `ip`: it records every command and whether its context was live.
type ipRecorder struct {
	mu    sync.Mutex
	calls []string
	live  []bool
	fail  error
}

func (r *ipRecorder) run(ctx context.Context, args ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, strings.Join(args, " "))
	r.live = append(r.live, ctx.Err() == nil)
	return r.fail
}

func (r *ipRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

var staticLinks = func() ([]Link, error) { return []Link{{Name: "eth1", MAC: "52:54:00:00:00:02"}}, nil }

// TestSetStaticIPExpires: the init container's address expires unless the refresh container
// takes it over, so a pod that never gets that far leaves nothing behind for long.
func TestSetStaticIPExpires(t *testing.T) {
	var r ipRecorder
	c := Config{ProvisioningIP: netip.MustParseAddr("172.22.0.3"), Prefix: 24, Interface: "eth1"}
	iface, err := SetStaticIP(context.Background(), c, staticLinks, r.run)
	if err != nil || iface != "eth1" {
		t.Fatalf("SetStaticIP = %q, %v", iface, err)
	}
	if want := []string{"addr replace 172.22.0.3/24 dev eth1 valid_lft 30 preferred_lft 30"}; !slices.Equal(r.calls, want) {
		t.Errorf("ip calls %q, want %q", r.calls, want)
	}
}

// TestKeepStaticIPDeletesOnStop: the refresh container renews a short lifetime and, when its pod
// stops, deletes the address (with a context of its own: the pod's is over), so the next pod on
// another node is the only one holding it.
func TestKeepStaticIPDeletesOnStop(t *testing.T) {
	var r ipRecorder
	c := Config{ProvisioningIP: netip.MustParseAddr("fd00:1101::3"), Prefix: 64, MACs: []string{"52:54:00:00:00:02"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logged []string
	go func() {
		done <- KeepStaticIP(ctx, c, staticLinks, r.run, time.Millisecond, func(f string, a ...any) { logged = append(logged, f) })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for r.count() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := len(r.calls)
	if n < 4 {
		t.Fatalf("ip calls %q: want refreshes, then a deletion", r.calls)
	}
	for _, call := range r.calls[:n-1] {
		if call != "addr replace fd00:1101::3/64 dev eth1 valid_lft 10 preferred_lft 10" {
			t.Errorf("refresh %q", call)
		}
	}
	if r.calls[n-1] != "addr del fd00:1101::3/64 dev eth1" || !r.live[n-1] {
		t.Errorf("last call %q (live context %v): want the address deleted", r.calls[n-1], r.live[n-1])
	}
	if len(logged) != 1 {
		t.Errorf("logged %q", logged)
	}
}

// TestKeepStaticIPFails: an `ip` that fails while the pod runs is an error (the container
// restarts), not a silent loop.
func TestKeepStaticIPFails(t *testing.T) {
	r := ipRecorder{fail: errors.New("RTNETLINK answers: Operation not permitted")}
	c := Config{ProvisioningIP: netip.MustParseAddr("172.22.0.3"), Prefix: 24, Interface: "eth1"}
	if err := KeepStaticIP(context.Background(), c, staticLinks, r.run, time.Millisecond, t.Logf); err == nil {
		t.Fatal("no error")
	}
}
