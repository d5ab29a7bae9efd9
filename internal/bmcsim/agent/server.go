package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// commandServer is the agent API of every agent of a Runner, on one listener. Each agent owns the
// path prefix /agents/<id>, which is part of its callback_url; Ironic appends /v1/commands/ to
// the callback_url (agent_client._get_command_url), so a path prefix works.
type commandServer struct {
	ln   net.Listener
	srv  *http.Server
	base string
	// certPEM is the server's certificate with AutoTLS ("" without).
	certPEM string

	mu     sync.Mutex
	agents map[string]*agentInstance
}

func newCommandServer(listen string, autoTLS bool) (*commandServer, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	s := &commandServer{ln: ln, base: "http://" + ln.Addr().String(), agents: map[string]*agentInstance{}}
	if autoTLS {
		cert, certPEM, err := selfSigned(ln.Addr().(*net.TCPAddr).IP)
		if err != nil {
			ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		s.ln, s.base, s.certPEM = ln, "https://"+s.ln.Addr().String(), certPEM
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// selfSigned makes the agent API's certificate for ip, as ironic-python-agent generates one at
// start with enable_auto_tls.
func selfSigned(ip net.IP) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, string(certPEM), nil
}

func (s *commandServer) register(a *agentInstance) string {
	s.mu.Lock()
	s.agents[a.id] = a
	s.mu.Unlock()
	return s.base + "/agents/" + a.id
}

func (s *commandServer) unregister(id string) {
	s.mu.Lock()
	delete(s.agents, id)
	s.mu.Unlock()
}

func (s *commandServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// ironicFaultBody is an error in the shape ironic-python-agent sends and Ironic reads (faultstring).
func writeFault(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{
		"type": typ, "code": status, "message": msg, "details": msg, "faultstring": msg,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *commandServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/agents/")
	if !ok {
		writeFault(w, http.StatusNotFound, "NotFound", "no such agent")
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	a := s.agents[id]
	s.mu.Unlock()
	if a == nil {
		writeFault(w, http.StatusNotFound, "NotFound", "no agent "+id+" (the server is off or rebooted)")
		return
	}
	if a.isCrashed() {
		// A crashed agent does not answer: drop the connection.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		writeFault(w, http.StatusServiceUnavailable, "Crashed", "agent crashed")
		return
	}
	sub = strings.TrimSuffix(sub, "/")
	switch sub {
	case "", "v1":
		writeJSON(w, http.StatusOK, map[string]any{
			"name":    "OpenStack Ironic Python Agent API (metalforge bmcsim)",
			"version": a.r.cfg.AgentVersion,
		})
		return
	case "v1/commands":
	default:
		writeFault(w, http.StatusNotFound, "NotFound", "unknown path "+r.URL.Path)
		return
	}
	if !a.tokenOK(r.URL.Query().Get("agent_token")) {
		writeFault(w, http.StatusUnauthorized, "InvalidAgentToken", "Invalid or missing agent_token")
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"commands": a.commandList()})
	case http.MethodPost:
		var body struct {
			Name   string         `json:"name"`
			Params map[string]any `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
			writeFault(w, http.StatusBadRequest, "InvalidContentError", fmt.Sprintf("invalid command body: %v", err))
			return
		}
		wait := r.URL.Query().Get("wait") == "true"
		cmd, status, err := a.execute(r.Context(), body.Name, body.Params, wait)
		if err != nil {
			typ := "InvalidCommandError"
			if status == http.StatusConflict {
				typ = "AgentIsBusy"
			}
			writeFault(w, status, typ, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, cmd)
	default:
		writeFault(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" not allowed")
	}
}
