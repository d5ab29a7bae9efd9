package subprocess

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestStopAndTail(t *testing.T) {
	p, err := Start("sleeper", "/bin/sh", t.TempDir(), Options{Env: []string{"GREETING=hello"}}, "-c", "echo $GREETING; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.Tail(5), "hello") {
		if p.Exited() {
			t.Fatalf("exited early: %q", p.Tail(5))
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	if !p.Exited() {
		t.Error("Stop returned while the process runs")
	}
	p.Stop() // twice is fine
}

// A readiness wait ends as soon as the process exits, with its log in the error.
func TestWaitHTTPEndsWhenTheProcessExits(t *testing.T) {
	p, err := Start("crasher", "/bin/sh", t.TempDir(), Options{}, "-c", "echo cannot start >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitHTTP(context.Background(), "http://127.0.0.1:1/readyz")
	if err == nil || !strings.Contains(err.Error(), "crasher exited") || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("error %v", err)
	}
}
