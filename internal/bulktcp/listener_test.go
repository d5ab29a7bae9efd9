package bulktcp

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// noDelay reads TCP_NODELAY of c's socket.
func noDelay(t testing.TB, c syscall.Conn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return v
}

// probeReader hands out its data and records TCP_NODELAY of conn at its first Read, which
// TCPConn.ReadFrom makes while it streams (a reader that is not a file takes the copying path).
type probeReader struct {
	t       *testing.T
	conn    syscall.Conn
	data    *bytes.Reader
	seen    int
	checked bool
}

func (p *probeReader) Read(b []byte) (int, error) {
	if !p.checked {
		p.seen, p.checked = noDelay(p.t, p.conn), true
	}
	return p.data.Read(b)
}

func TestNagleOnlyWhileStreaming(t *testing.T) {
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	server, ok := accepted.(interface {
		syscall.Conn
		io.ReaderFrom
	})
	if !ok {
		t.Fatalf("accepted connection %T has no ReadFrom or SyscallConn", accepted)
	}
	if _, ok := accepted.(interface{ CloseWrite() error }); !ok {
		t.Fatalf("accepted connection %T lost CloseWrite, which net/http uses to close gracefully", accepted)
	}

	if got := noDelay(t, server); got == 0 {
		t.Fatalf("TCP_NODELAY = 0 before streaming; want Go's default (on) for small writes")
	}
	body := bytes.Repeat([]byte("metalforge"), 10000)
	probe := &probeReader{t: t, conn: server, data: bytes.NewReader(body)}
	received := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(client, int64(len(body))))
		received <- b
	}()
	n, err := server.ReadFrom(probe)
	if err != nil || n != int64(len(body)) {
		t.Fatalf("ReadFrom = %d, %v; want %d bytes", n, err, len(body))
	}
	if !probe.checked || probe.seen != 0 {
		t.Fatalf("TCP_NODELAY while streaming = %d (checked %v); want 0: Nagle's algorithm on", probe.seen, probe.checked)
	}
	if got := noDelay(t, server); got == 0 {
		t.Fatalf("TCP_NODELAY = 0 after streaming; want it back on, which pushes the last partial segment out")
	}
	if got := <-received; !bytes.Equal(got, body) {
		t.Fatalf("client received %d bytes, not the %d streamed", len(got), len(body))
	}
}

// BenchmarkFileAnswer prints the time for one keep-alive GET of a file, from bulktcp.Listen and
// from net.Listen: small files must not wait for the client's delayed acknowledgement.
//
//	go test ./internal/bulktcp/ -run - -bench FileAnswer
func BenchmarkFileAnswer(b *testing.B) {
	dir := b.TempDir()
	sizes := []int{100, 5000, 300_000, 8 << 20}
	for _, size := range sizes {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(size)), make([]byte, size), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range []struct {
		name   string
		listen func(network, address string) (net.Listener, error)
	}{{"bulktcp", Listen}, {"net", net.Listen}} {
		ln, err := l.listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: http.FileServer(http.Dir(dir))}
		go func() { _ = srv.Serve(ln) }()
		client := &http.Client{}
		for _, size := range sizes {
			b.Run(fmt.Sprintf("%s/%dB", l.name, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				url := fmt.Sprintf("http://%s/%d", ln.Addr(), size)
				for b.Loop() {
					resp, err := client.Get(url)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		srv.Close()
	}
}
