package ironicrunner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/metalforge/metalforge/internal/bulktcp"
)

// FileHandler serves files below root: GET and HEAD, byte ranges (BMCs and agents resume
// downloads), no directory listings (the images carry each host's secrets), /healthz for the
// kubelet's probe.
func FileHandler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := path.Clean("/" + r.URL.Path)
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, st.Name(), st.ModTime(), f)
	})
}

// Serve runs the image server of mode httpd: HTTP on HTTPPort and, with TLS and a
// VMediaTLSPort, HTTPS there, until ctx ends.
func Serve(ctx context.Context, c Config, ip string, logf func(string, ...any)) error {
	root := c.httpRoot()
	if err := os.MkdirAll(filepath.Join(root, "images"), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", root, err)
	}
	h := FileHandler(root)
	servers := []*http.Server{{Addr: net.JoinHostPort(ip, fmt.Sprint(c.HTTPPort)), Handler: h, ReadHeaderTimeout: 30 * time.Second}}
	if c.TLS() && c.VMediaTLSPort != 0 {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return fmt.Errorf("loading %s and %s: %w", c.CertFile, c.KeyFile, err)
		}
		servers = append(servers, &http.Server{Addr: net.JoinHostPort(ip, fmt.Sprint(c.VMediaTLSPort)), Handler: h, ReadHeaderTimeout: 30 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		// Plain HTTP streams the images with sendfile, which Nagle's algorithm on while a body
		// streams makes faster (bulktcp); TLS encrypts in the process and keeps Go's default.
		listen := bulktcp.Listen
		if s.TLSConfig != nil {
			listen = net.Listen
		}
		ln, err := listen("tcp", s.Addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
		if s.TLSConfig != nil {
			ln = tls.NewListener(ln, s.TLSConfig)
		}
		logf("serving %s on %s (tls %v)", root, s.Addr, s.TLSConfig != nil)
		go func() { errc <- s.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	for _, s := range servers {
		_ = s.Close()
	}
	return nil
}
