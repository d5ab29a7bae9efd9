package nodewatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// TestRunListsWhileAskedAtMostTwoInFlight runs the list rounds on the real clock, counting the
// rounds by the loop's clock readings so that "nothing more happened" is checked after rounds that
// did happen, not after a sleep: no list while no host asks; then a list every round, but never
// more than maxInFlight waiting at once; a new one as soon as one comes back.
func TestRunListsWhileAskedAtMostTwoInFlight(t *testing.T) {
	var clockReads, entered atomic.Int64
	release := make(chan struct{})
	w := New(Config{
		List: func(ctx context.Context) ([]nodes.Node, time.Time, error) {
			sent := time.Now()
			entered.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, sent, nil
		},
		HostOf:     hostOf,
		ShortDelay: 5 * time.Millisecond,
		LongDelay:  time.Hour, // a write keeps the rounds short for the whole test
		Now: func() time.Time {
			clockReads.Add(1)
			return time.Now()
		},
	})
	// rounds waits until the loop has read the clock n more times (one read per round while no
	// list comes back, since List, the only other reader here, is blocked).
	rounds := func(n int64) {
		t.Helper()
		target := clockReads.Load() + n
		for clockReads.Load() < target {
			time.Sleep(time.Millisecond)
		}
	}
	waitEntered := func(n int64) {
		t.Helper()
		for entered.Load() < n {
			time.Sleep(time.Millisecond)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	rounds(5)
	if got := entered.Load(); got != 0 {
		t.Fatalf("%d lists while no host asked", got)
	}

	w.Asked()
	w.Writing("u1")() // lists every ShortDelay from now on
	waitEntered(maxInFlight)
	rounds(5)
	if got := entered.Load(); got != maxInFlight {
		t.Fatalf("%d lists waiting at once, want at most %d", got, maxInFlight)
	}
	release <- struct{}{} // one list comes back: the next round sends another
	waitEntered(maxInFlight + 1)

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if w.inFlight.Load() != 0 {
		t.Errorf("Run returned with %d lists in flight", w.inFlight.Load())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		t.Error("the watcher still counts as running after Run returned")
	}
}
