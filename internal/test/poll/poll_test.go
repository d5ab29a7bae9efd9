package poll

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	Until(t, "the third call", func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprintf("call %d", calls)
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3 (Until must stop at the first true)", calls)
	}
}

// recorder stands in for the test that Within fails: Fatalf records the message and ends the
// goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWithinFailsNamingWhatItWaitedForAndWhatItSaw(t *testing.T) {
	r := &recorder{}
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Within(r, 50*time.Millisecond, "the host to be provisioned", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("state provisioning (check %d)", calls)
		})
	}()
	<-done
	if calls < 2 {
		t.Errorf("cond called %d times before giving up, want it polled", calls)
	}
	want := fmt.Sprintf("waiting for the host to be provisioned: state provisioning (check %d)", calls)
	if !strings.Contains(r.failed, want) || !strings.Contains(r.failed, "50ms") {
		t.Errorf("failure %q, want it to name the bound, what was awaited and the last message %q", r.failed, want)
	}
}
