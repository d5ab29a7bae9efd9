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

// fakeOneNodeIronic answers for one node whose provision state (and maintenance, with its fault)
// the test sets, and records the provision state changes and maintenance clears asked for.
type fakeOneNodeIronic struct {
	mu          sync.Mutex
	state       string
	target      string // target_provision_state
	busy        int    // provision state changes answered 409 (node locked) before one is taken
	gets        int    // GETs of the node
	lists       bool   // answers the node's BIOS and firmware lists (empty); else they fail the test
	maintenance bool
	fault       string
	targets     []string
	unsets      int
}

func (f *fakeOneNodeIronic) serve(t *testing.T, uuid string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.URL.Path == "/v1/" || r.URL.Path == "/v1":
			_, _ = fmt.Fprint(w, `{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": "1.1", "version": "1.115"}}`)
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodGet:
			f.gets++
			_, _ = fmt.Fprintf(w, `{"uuid": %q, "provision_state": %q, "target_provision_state": %q, "power_state": "power on", "automated_clean": false, "maintenance": %t, "fault": %q}`,
				uuid, f.state, f.target, f.maintenance, f.fault)
		case f.lists && r.URL.Path == "/v1/nodes/"+uuid+"/bios":
			_, _ = fmt.Fprint(w, `{"bios": []}`)
		case f.lists && r.URL.Path == "/v1/nodes/"+uuid+"/firmware":
			_, _ = fmt.Fprint(w, `{"firmware": []}`)
		case r.URL.Path == "/v1/nodes/"+uuid+"/maintenance" && r.Method == http.MethodDelete:
			f.maintenance, f.fault = false, ""
			f.unsets++
			w.WriteHeader(http.StatusAccepted)
		case r.URL.Path == "/v1/nodes/"+uuid+"/states/provision" && r.Method == http.MethodPut:
			var body struct{ Target string }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			f.targets = append(f.targets, body.Target)
			if f.busy > 0 {
				f.busy--
				w.WriteHeader(http.StatusConflict)
				_, _ = fmt.Fprintf(w, `{"error_message": "{\"faultstring\": \"Node %s is locked by host conductor, please retry after the current operation is completed.\", \"debuginfo\": null}"}`, uuid)
				return
			}
			w.WriteHeader(http.StatusAccepted)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// provisioner returns a Provisioner whose Ironic is f, serving the node uuid.
func (f *fakeOneNodeIronic) provisioner(t *testing.T, uuid string) *Provisioner {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoint = f.serve(t, uuid).URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fakeOneNodeIronic) set(state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = state
}

func (f *fakeOneNodeIronic) asked() []string {
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
	f := &fakeOneNodeIronic{state: "adopting"}
	p := f.provisioner(t, uuid)
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

// TestStepFailureFaultCleared: Ironic puts a node whose clean step failed in maintenance with the
// fault "clean failure" (a failed service step: "service failure"), and nothing in Ironic clears
// it: the state change that follows the failure (here the manage of a cleaning the host retries)
// clears it first. A power failure's fault clears itself at Ironic's next successful power sync:
// the provisioner waits. (Until a preparation's retry waited forever on "clean failure".)
func TestStepFailureFaultCleared(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0003"
	for _, tc := range []struct {
		fault   string
		cleared bool
	}{
		{"clean failure", true},
		{"service failure", true},
		{"power failure", false},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			f := &fakeOneNodeIronic{state: "clean failed", maintenance: true, fault: tc.fault}
			p := f.provisioner(t, uuid)
			host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: "redfish+http://127.0.0.1:1/redfish/v1/Systems/1",
				AutomatedCleaningMode: metal3.CleaningModeDisabled}
			res, err := p.Deprovision(context.Background(), host, true) // the host retries: manage
			if err != nil || res.Failed() {
				t.Fatalf("deprovisioning after a failed cleaning: %s, %v", describe(res), err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if tc.cleared && (f.unsets != 1 || len(f.targets) != 1 || f.targets[0] != "manage") {
				t.Errorf("maintenance cleared %d times, states asked %v; want it cleared once, then manage", f.unsets, f.targets)
			}
			if !tc.cleared && (f.unsets != 0 || len(f.targets) != 0 || !res.Busy) {
				t.Errorf("maintenance cleared %d times, states asked %v, %s; want a wait, nothing asked", f.unsets, f.targets, describe(res))
			}
		})
	}
}

func (f *fakeOneNodeIronic) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}
