package kubelet

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// forwards stand in for the service proxy where a Service's port differs from its target port:
// the Service's name resolves to the pod (hosts), so the pod's address also answers on the
// Service's port and passes each connection on to the target port. Only pods with addresses of
// their own get them (a host-network pod shares the node's ports).
type forwards struct {
	mu        sync.Mutex
	listeners map[int32]net.Listener
}

// forward makes the pod answer on the Service's ports that differ from their targets.
func (p *pod) forward(ctx context.Context, s *corev1.Service) {
	if p.spec.HostNetwork {
		return
	}
	p.fwd.mu.Lock()
	defer p.fwd.mu.Unlock()
	if p.fwd.listeners == nil {
		p.fwd.listeners = map[int32]net.Listener{}
		go func() {
			<-ctx.Done()
			p.fwd.mu.Lock()
			defer p.fwd.mu.Unlock()
			for _, ln := range p.fwd.listeners {
				_ = ln.Close()
			}
		}()
	}
	if ctx.Err() != nil {
		return
	}
	for _, sp := range s.Spec.Ports {
		target := targetPort(p, sp)
		if target == sp.Port || p.fwd.listeners[sp.Port] != nil {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(p.ip, strconv.Itoa(int(sp.Port))))
		if err != nil {
			p.node.logf("pod %s: service %s port %d: %v", p.name, s.Name, sp.Port, err)
			continue
		}
		p.fwd.listeners[sp.Port] = ln
		to := net.JoinHostPort(p.ip, strconv.Itoa(int(target)))
		go accept(ln, to)
	}
}

func accept(ln net.Listener, to string) {
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go func() {
			defer conn.Close()
			up, err := net.Dial("tcp", to)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, conn)
				if c, ok := up.(*net.TCPConn); ok {
					_ = c.CloseWrite()
				}
				close(done)
			}()
			_, _ = io.Copy(conn, up)
			<-done
		}()
	}
}
