package ironic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// fakeAdoptingIronic answers for one node whose provision state the test sets, and records the
// provision state changes asked for.
type fakeAdoptingIronic struct {
	mu      sync.Mutex
	state   string
	targets []string
}

func (f *fakeAdoptingIronic) serve(t *testing.T, uuid string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.URL.Path == "/v1/" || r.URL.Path == "/v1":
			_, _ = fmt.Fprint(w, `{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": "1.1", "version": "1.115"}}`)
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodGet:
			_, _ = fmt.Fprintf(w, `{"uuid": %q, "provision_state": %q, "power_state": "power on", "automated_clean": false}`, uuid, f.state)
		case r.URL.Path == "/v1/nodes/"+uuid+"/states/provision" && r.Method == http.MethodPut:
			var body struct{ Target string }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			f.targets = append(f.targets, body.Target)
			w.WriteHeader(http.StatusAccepted)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeAdoptingIronic) set(state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = state
}

func (f *fakeAdoptingIronic) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.targets...)
}

// TestDeprovisionWaitsForAdoption reproduces what the fault campaign found: Ironic lost its
// database, the operator registered a provisioned host again and asked Ironic to adopt its node,
// and the image was removed while the node was still "adopting". Deprovisioning then returned an
// error ("Ironic node … is \"adopting\"") that controller-runtime retried at its error pace; it
// must wait for the adoption and undeploy the node once it is active. An adoption that failed
// leaves nothing to undeploy: the node is managed (then provided).
func TestDeprovisionWaitsForAdoption(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0002"
	f := &fakeAdoptingIronic{state: "adopting"}
	srv := f.serve(t, uuid)
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// The clock moves a minute per call, so that no call is answered from an earlier read.
	now := time.Unix(1700000000, 0)
	p.now = func() time.Time { now = now.Add(time.Minute); return now }
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: "redfish+http://127.0.0.1:1/redfish/v1/Systems/1",
		AutomatedCleaningMode: metal3.CleaningModeDisabled}
	ctx := context.Background()

	res, err := p.Deprovision(ctx, host, false)
	if err != nil || !res.Busy || res.Failed() {
		t.Fatalf("deprovisioning while the node is adopting: %s, %v; want a wait", describe(res), err)
	}
	if got := f.asked(); len(got) != 0 {
		t.Fatalf("asked Ironic for %v while the node was adopting, want nothing", got)
	}

	f.set("active")
	if res, err := p.Deprovision(ctx, host, false); err != nil || res.Failed() {
		t.Fatalf("deprovisioning the adopted node: %s, %v", describe(res), err)
	}
	if got := f.asked(); len(got) != 1 || got[0] != "deleted" {
		t.Fatalf("provision state changes asked once adopted: %v, want [deleted]", got)
	}

	f.set("adopt failed")
	if res, err := p.Deprovision(ctx, host, false); err != nil || res.Failed() {
		t.Fatalf("deprovisioning after a failed adoption: %s, %v", describe(res), err)
	}
	if got := f.asked(); len(got) != 2 || got[1] != "manage" {
		t.Errorf("provision state changes after a failed adoption: %v, want manage", got)
	}
}
