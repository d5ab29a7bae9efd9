package bulktcp

import (
	"net"
	"syscall"
	"testing"
)

// noDelay reads TCP_NODELAY of c's socket.
func noDelay(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
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

func TestAcceptedConnectionsHaveNagleOn(t *testing.T) {
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, tc := range []struct {
		name string
		ln   net.Listener
		want int
	}{
		{name: "bulktcp.Listen: Nagle on", ln: ln, want: 0},
		{name: "net.Listen (Go's default): TCP_NODELAY", ln: plain, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, err := net.Dial("tcp", tc.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := tc.ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			if got := noDelay(t, server); (got != 0) != (tc.want != 0) {
				t.Fatalf("TCP_NODELAY = %d on the accepted connection, want %d", got, tc.want)
			}
		})
	}
}
