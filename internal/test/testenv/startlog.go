package testenv

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
)

// startOutputMax bounds what startOutput keeps of one process's output.
const startOutputMax = 32 << 10

// startOutput keeps the last output a control-plane process (etcd, kube-apiserver) wrote while
// the control plane started, so that a failed start can say why: envtest's own error only says
// that the process "may have failed to start, or stopped unexpectedly". Once the control plane
// runs, output is dropped: both processes log for as long as the tests run and nobody reads it.
type startOutput struct {
	mu      sync.Mutex
	buf     []byte
	started bool
}

func (o *startOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started {
		return len(p), nil
	}
	o.buf = append(o.buf, p...)
	if over := len(o.buf) - startOutputMax; over > 0 {
		o.buf = append(o.buf[:0], o.buf[over:]...)
	}
	return len(p), nil
}

// running drops what was kept and everything written from now on.
func (o *startOutput) running() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started, o.buf = true, nil
}

// problems returns the last n lines kept that report a problem, each cut to lineMax characters
// ("" when there is none): etcd's JSON lines at level warn or worse, klog's E and F lines
// (kube-apiserver), and a Go panic's or a command's "Error:" line. The rest (info lines, stack
// frames) would bury the one line that says why.
func (o *startOutput) problems(n int) string {
	const lineMax = 300
	o.mu.Lock()
	kept := string(o.buf)
	o.mu.Unlock()
	var out []string
	for l := range strings.SplitSeq(kept, "\n") {
		if !problemLine(l) {
			continue
		}
		if len(l) > lineMax {
			l = l[:lineMax] + "…"
		}
		out = append(out, l)
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

var problemPattern = regexp.MustCompile(`^(\{.*"level":"(warn|error|dpanic|panic|fatal)"|[EF]\d{4} |panic: |Error: )`)

func problemLine(l string) bool { return problemPattern.MatchString(l) }

// startFailure explains a failed control-plane start: the processes' last output and the free
// space where etcd keeps its data (etcd preallocates a 64 MiB write-ahead log and exits at once
// when the disk cannot hold it).
func startFailure(etcd, apiServer *startOutput) string {
	var b strings.Builder
	for _, p := range []struct {
		name string
		out  *startOutput
	}{{"etcd", etcd}, {"kube-apiserver", apiServer}} {
		if last := p.out.problems(8); last != "" {
			fmt.Fprintf(&b, "\n%s reported:\n%s", p.name, last)
		}
	}
	if free, err := freeBytes(os.TempDir()); err == nil {
		fmt.Fprintf(&b, "\nfree space in %s (etcd's data): %d MiB", os.TempDir(), free>>20)
	}
	return b.String()
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
