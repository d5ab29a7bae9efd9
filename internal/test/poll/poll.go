// Package poll waits in tests for something a controller does asynchronously: one loop, one
// bound, one failure message, instead of a copy of them in every suite.
package poll

import (
	"testing"
	"time"
)

// Limit bounds a wait. It is a bound, not a sleep, so it is generous: on CI's two cores, with the
// other suites running beside it, a reconcile waits seconds for the CPU (waits bounded at 30 s
// timed out there). A test that needs longer (a kwok node rolling a DaemonSet) says so with Within.
const Limit = 60 * time.Second

// interval between checks: short enough not to slow a suite down, long enough not to load the
// API server with reads.
const interval = 20 * time.Millisecond

// Until calls cond until it holds, and fails t after Limit with what it waited for and cond's
// last message (what it saw instead).
func Until(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	Within(t, Limit, what, cond)
}

// Within is Until with a bound of its own.
func Within(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", limit, what, msg)
		}
		time.Sleep(interval)
	}
}
