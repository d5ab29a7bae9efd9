// Package bulktcp makes TCP listeners for servers whose answers are mostly large files sent with
// sendfile: the image-customization-controller's per-host images and the Ironic runner's httpd on
// plain HTTP (agent and OS images).
//
// Go turns Nagle's algorithm off on every TCP connection it makes (TCP_NODELAY), which suits
// request and answer protocols: a small write leaves at once. For a file streamed with sendfile it
// costs throughput: every chunk sendfile hands the socket is pushed out on its own. Measured on the
// 2-core development VM with 32 concurrent 1 GiB downloads over loopback from a plain Go file
// server: 4850 MiB/s with TCP_NODELAY, 5830 MiB/s without (README, bench-images).
//
// Nagle's algorithm on for the whole connection has a price for small answers, though: net/http
// writes the headers and the first 512 bytes of a body, then hands the rest to sendfile; with
// Nagle on, a rest shorter than a segment waits until the client acknowledges the first write,
// and clients delay that acknowledgement (40 ms on Linux). A 5000-byte file took 44 ms instead of
// 0.05 ms. So connections keep Go's TCP_NODELAY, and Nagle's algorithm is on only while net/http
// streams a body through the connection's ReadFrom (sendfile); turning TCP_NODELAY back on at the
// end pushes the body's last partial segment out at once (Linux pushes pending data when the
// option is set).
package bulktcp

import (
	"io"
	"net"
)

// Listen is net.Listen whose accepted TCP connections stream bodies with Nagle's algorithm on.
func Listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return listener{ln}, nil
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return bulkConn{tc}, nil
	}
	return c, nil
}

// bulkConn is a TCP connection whose ReadFrom (what net/http calls for a body it can send with
// sendfile or splice) runs with Nagle's algorithm on. Every other method is the TCPConn's own,
// so net/http still finds CloseWrite and the deadlines.
type bulkConn struct{ *net.TCPConn }

func (c bulkConn) ReadFrom(r io.Reader) (int64, error) {
	// Best effort both ways: a connection whose option cannot be set is still served, at Go's
	// default.
	_ = c.SetNoDelay(false)
	n, err := c.TCPConn.ReadFrom(r)
	_ = c.SetNoDelay(true)
	return n, err
}
