package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestStartOutputKeepsTheProblemsOfTheStartOnly(t *testing.T) {
	var o startOutput
	fmt.Fprintln(&o, `{"level":"info","msg":"starting an etcd server"}`)
	fmt.Fprintln(&o, `{"level":"warn","msg":"failed to preallocate an initial WAL file","error":"no space left on device"}`)
	fmt.Fprintln(&o, "\tgo.etcd.io/etcd/server/v3/etcdserver.bootstrapNewWAL")
	fmt.Fprintln(&o, "I1125 08:03:22.694188 1 server.go:1] serving")
	fmt.Fprintln(&o, "E1125 08:03:22.694188 1 run.go:72] \"command failed\" err=\"open /x: no such file\"")
	fmt.Fprintln(&o, "panic: failed to create WAL")
	fmt.Fprintln(&o, `{"level":"panic","msg":"`+strings.Repeat("x", 400)+`"}`)
	got := strings.Split(o.problems(10), "\n")
	want := []string{
		`{"level":"warn","msg":"failed to preallocate an initial WAL file","error":"no space left on device"}`,
		`E1125 08:03:22.694188 1 run.go:72] "command failed" err="open /x: no such file"`,
		"panic: failed to create WAL",
	}
	if len(got) != 4 || strings.Join(got[:3], "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant the warn, E and panic lines, then the long panic line cut", strings.Join(got, "\n"))
	}
	if !strings.HasSuffix(got[3], "…") || len(got[3]) > 310 {
		t.Errorf("a long line is cut to ~300 characters: got %d characters", len(got[3]))
	}
	if last := o.problems(1); last != got[3] {
		t.Errorf("problems(1) = %q, want only the last problem", last)
	}

	o.running()
	fmt.Fprintln(&o, `{"level":"error","msg":"after the start"}`)
	if p := o.problems(10); p != "" {
		t.Errorf("after running() nothing is kept, got %q", p)
	}
}

func TestStartOutputIsBounded(t *testing.T) {
	var o startOutput
	line := `{"level":"warn","msg":"` + strings.Repeat("y", 90) + `"}` + "\n"
	for range 2 * startOutputMax / len(line) {
		if _, err := o.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintln(&o, "panic: the last one")
	if len(o.buf) > startOutputMax {
		t.Fatalf("kept %d bytes, bound is %d", len(o.buf), startOutputMax)
	}
	if p := o.problems(1); p != "panic: the last one" {
		t.Errorf("the newest output is kept: got %q", p)
	}
}

// A control plane that cannot start says why. The cause CI met: a disk too full for etcd's
// 64 MiB write-ahead log, here a 20 MiB tmpfs as the temporary directory.
func TestStartOnAFullDiskSaysWhy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "testenv-full", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	t.Setenv("TMPDIR", dir)
	attempts, wait := startAttempts, startRetryWait
	startAttempts, startRetryWait = 2, time.Millisecond
	t.Cleanup(func() { startAttempts, startRetryWait = attempts, wait })

	e, err := Start(Options{})
	if err == nil {
		_ = e.Stop()
		t.Fatal("etcd started on a 20 MiB disk")
	}
	for _, want := range []string{"etcd reported:", "no space left on device", "free space in " + dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
