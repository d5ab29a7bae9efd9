package agent

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
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
