// Package bulktcp makes TCP listeners for servers whose answers are mostly large files sent with
// sendfile: the image-customization-controller's per-host images and the Ironic runner's httpd on
// plain HTTP (agent and OS images).
//
// Go turns Nagle's algorithm off on every TCP connection it makes (TCP_NODELAY), which suits
// request and answer protocols: a small write leaves at once. For a file streamed with sendfile it
// costs throughput: every chunk sendfile hands the socket is pushed out on its own. With Nagle's
// algorithm on, full segments still leave at once and only a partial one waits, at most until what
// was sent before it is acknowledged: the last few bytes of an answer may wait one round trip,
// a gigabyte of image does not. Measured on the 2-core development VM with 32 concurrent 1 GiB
// downloads over loopback from a plain Go file server: 4850 MiB/s with TCP_NODELAY, 5830 MiB/s
// without (README, bench-images).
package bulktcp

import "net"

// Listen is net.Listen whose accepted TCP connections have Nagle's algorithm on.
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
		// Best effort: a connection whose option cannot be set is still served.
		_ = tc.SetNoDelay(false)
	}
	return c, nil
}
