// Package loopback holds the small helpers that the end-to-end tests, the benchmarks and the demo
// share for the processes they run on 127.0.0.1: an address to give a process, and a wait until
// its HTTP endpoint answers.
package loopback

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// FreeAddr returns a 127.0.0.1 address whose port was free a moment ago. The port is released
// before returning so that the process it is meant for can listen on it; another process could take
// it in between, which on a test machine is rare enough to accept.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err) // no loopback: nothing here can work
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitOK polls url every 100 ms until it answers 200 OK or ctx ends.
func WaitOK(ctx context.Context, url string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
