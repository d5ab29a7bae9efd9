package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
)

// TestIPAInsecure: an agent booted with ipa-insecure=1 reaches an Ironic whose certificate it
// cannot verify (self-signed, as the cluster-baremetal-operator's); without it, it refuses.
func TestIPAInsecure(t *testing.T) {
	var lookups, conns atomic.Int32
	ironic := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lookups.Add(1)
		http.NotFound(w, r) // "not found yet": the agent keeps looking
	}))
	ironic.Config.ErrorLog = log.New(io.Discard, "", 0)
	ironic.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ironic.StartTLS()
	defer ironic.Close()
	for name, tc := range map[string]struct {
		params []string
		want   bool
	}{
		"ipa-insecure=1": {params: []string{"ipa-insecure=1"}, want: true},
		"verifying":      {want: false},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := NewRunner(Config{Listen: "127.0.0.1:0", LookupInterval: 50 * time.Millisecond, BootDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			iso, err := deployimage.ISO(ironic.URL, tc.params...)
			if err != nil {
				t.Fatal(err)
			}
			lookups.Store(0)
			conns.Store(0)
			if err := r.Boot(&fakeMachine{}, iso); err != nil {
				t.Fatal(err)
			}
			// Wait for the agent's second connection: by then its first attempt either got an
			// answer or was refused at the handshake.
			for conns.Load() < 2 && lookups.Load() == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			if got := lookups.Load() > 0; got != tc.want {
				t.Errorf("Ironic was reached: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAutoTLS: with AutoTLS the agent's callback URL is https and its heartbeat carries the
// certificate that verifies it, which is how Ironic (requiring TLS callbacks) then reaches it.
func TestAutoTLS(t *testing.T) {
	beats := make(chan heartbeatRequest, 4)
	ironic := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var hb heartbeatRequest
		if err := json.NewDecoder(req.Body).Decode(&hb); err == nil {
			select {
			case beats <- hb:
			default:
			}
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer ironic.Close()
	r, err := NewRunner(Config{APIURL: ironic.URL, HeartbeatInterval: time.Minute, AutoTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := newAgent(r, &fakeMachine{}, BootInfo{Token: "secret"}, ironic.URL, "")
	a.nodeUUID = "n1"
	a.callbackURL = r.srv.register(a)
	go a.heartbeatLoop()
	defer a.stop()
	hb := <-beats
	if !strings.HasPrefix(hb.CallbackURL, "https://127.0.0.1:") || !strings.Contains(hb.AgentVerifyCA, "BEGIN CERTIFICATE") {
		t.Fatalf("heartbeat %+v: want an https callback URL and the certificate", hb)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(hb.AgentVerifyCA))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Get(hb.CallbackURL + "/v1/commands/?agent_token=secret")
	if err != nil {
		t.Fatalf("reaching the agent with its certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET commands: HTTP %d", resp.StatusCode)
	}
}
