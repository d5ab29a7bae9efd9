package ironic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// fakeStatesIronic answers for one node (a JSON object) the requests of a preparation, a
// deprovisioning and a reboot: GET, PATCH (of fields and of keys inside extra, driver_info and
// properties; refused with 409 while a transition runs outside Ironic's UPDATE_ALLOWED_STATES, as
// Ironic does), provision and power state changes (moving the node as Ironic does), an empty
// history and BIOS. A change asked while late is set is carried out, then answered only after
// late: after the client's timeout, as an Ironic under load does.
type fakeStatesIronic struct {
	t       *testing.T
	mu      sync.Mutex
	node    map[string]any
	version string        // the API's maximum microversion
	late    time.Duration // answer the state changes this much later (0: at once)
	ignore  bool          // with late: do not carry the change out either (Ironic never got it)
	log     []string      // "PATCH", "PATCH refused", provision targets, "power <target>", "clean" (automated)
	url     string        // the fake's endpoint, for a restarted provisioner
	// changes counts the provision state changes: provision_updated_at moves with each, as in
	// Ironic (a fixed time long past, so no settle wait applies).
	changes int
}

// stateChanged moves provision_updated_at, as Ironic does with every provision state change.
func (f *fakeStatesIronic) stateChanged() {
	f.changes++
	f.node["provision_updated_at"] = time.Date(2026, 1, 1, 0, 0, f.changes, 0, time.UTC).Format(time.RFC3339)
}

// restarted is a new provisioner on the same Ironic: an operator restarted, with no memory.
func (f *fakeStatesIronic) restarted(t *testing.T) *Provisioner {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoint = f.url + "/v1/"
	cfg.ClientTimeout = clientTimeout
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const statesFakeUUID = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0077"

// clientTimeout is the client's timeout in these tests; fakeStatesIronic.late goes past it.
const clientTimeout = 300 * time.Millisecond

func newStatesFake(t *testing.T, version string, node map[string]any) (*fakeStatesIronic, *Provisioner, provisioner.Host) {
	t.Helper()
	f := &fakeStatesIronic{t: t, version: version, node: map[string]any{
		"uuid": statesFakeUUID, "name": "ns~h", "power_state": "power on",
		"extra": map[string]any{}, "driver_info": map[string]any{}, "properties": map[string]any{}, "driver_internal_info": map[string]any{},
	}}
	f.stateChanged()
	for k, v := range node {
		f.node[k] = v
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	cfg.ClientTimeout = clientTimeout
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: statesFakeUUID, BMCAddress: "redfish://192.0.2.1/redfish/v1/Systems/1"}
	return f, p, host
}

// set changes the node as Ironic would and makes the provisioner read it again.
func (f *fakeStatesIronic) set(p *Provisioner, fields map[string]any) {
	f.mu.Lock()
	for k, v := range fields {
		f.node[k] = v
	}
	if _, ok := fields["provision_state"]; ok {
		f.stateChanged()
	}
	f.mu.Unlock()
	p.watch.Writing(statesFakeUUID)() // reads before this one are out of date
}

func (f *fakeStatesIronic) requests() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, ", ")
}

func (f *fakeStatesIronic) field(name string) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node[name]
}

// updateAllowedIn is Ironic 39's states.UPDATE_ALLOWED_STATES.
var updateAllowedIn = map[string]bool{
	"deploy failed": true, "inspecting": true, "inspect failed": true, "inspect wait": true, "clean failed": true,
	"error": true, "verifying": true, "adopt failed": true, "rescue failed": true, "unrescue failed": true,
	"service": true, "service hold": true, "service failed": true,
}

func (f *fakeStatesIronic) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/" || r.URL.Path == "/v1" {
		_, _ = fmt.Fprintf(w, `{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": "1.1", "version": %q}}`, f.version)
		return
	}
	f.mu.Lock()
	path := strings.TrimPrefix(r.URL.Path, "/v1/nodes/"+statesFakeUUID)
	late := time.Duration(0)
	switch {
	case path == "" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(f.node)
	case path == "" && r.Method == http.MethodPatch:
		st, _ := f.node["provision_state"].(string)
		if target, _ := f.node["target_provision_state"].(string); target != "" && !updateAllowedIn[st] {
			f.log = append(f.log, "PATCH refused")
			w.WriteHeader(http.StatusConflict)
			_, _ = fmt.Fprintf(w, `{"error_message": "{\"faultstring\": \"Node %s can not be updated while a state transition is in progress.\"}"}`, statesFakeUUID)
			break
		}
		f.log = append(f.log, "PATCH")
		var ops []struct {
			Op, Path string
			Value    any
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ops); err != nil {
			f.t.Errorf("PATCH %s: %v", body, err)
		}
		for _, op := range ops {
			field, key, inside := strings.Cut(strings.TrimPrefix(op.Path, "/"), "/")
			switch {
			case !inside && op.Op == "remove":
				delete(f.node, field)
			case !inside:
				f.node[field] = op.Value
			case op.Op == "remove":
				delete(f.node[field].(map[string]any), key)
			default:
				f.node[field].(map[string]any)[key] = op.Value
			}
		}
		_ = json.NewEncoder(w).Encode(f.node)
	case path == "/states/provision" && r.Method == http.MethodPut:
		var body struct{ Target string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		f.log = append(f.log, body.Target)
		if !f.ignore {
			f.moveProvision(body.Target)
		}
		late = f.late
	case path == "/states/power" && r.Method == http.MethodPut:
		var body struct{ Target string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		f.log = append(f.log, "power "+body.Target)
		if !f.ignore {
			f.node["target_power_state"] = "power on" // a reboot's target (conductor/utils.py)
			if body.Target == "power off" || body.Target == "soft power off" {
				f.node["target_power_state"] = "power off"
			}
		}
		late = f.late
	case path == "/history":
		_, _ = fmt.Fprint(w, `{"history": []}`)
	case path == "/bios":
		_, _ = fmt.Fprint(w, `{"bios": []}`)
	default:
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	}
	f.mu.Unlock()
	if late > 0 {
		time.Sleep(late) // carried out; the answer comes after the client gave up
	}
	if strings.HasPrefix(path, "/states/") {
		w.WriteHeader(http.StatusAccepted)
	}
}

// moveProvision moves the node as Ironic's state machine does on target (the states its tests
// need; the rest of each transition is set by the test).
func (f *fakeStatesIronic) moveProvision(target string) {
	st, _ := f.node["provision_state"].(string)
	move := func(state, target string) {
		f.stateChanged()
		f.node["provision_state"] = state
		if target == "" {
			f.node["target_provision_state"] = nil
		} else {
			f.node["target_provision_state"] = target
		}
	}
	switch {
	case target == "clean" && st == "manageable":
		move("clean wait", "manageable")
	case target == "provide" && st == "manageable":
		if clean, _ := f.node["automated_clean"].(bool); clean {
			f.log = append(f.log, "clean")
			move("clean wait", "available")
		} else {
			move("available", "")
		}
	case target == "manage" && (st == "available" || st == "clean failed"):
		move("manageable", "")
	case target == "abort" && st == "wait call-back":
		move("deploy failed", "active")
	case target == "deleted":
		// DELETING → CLEANING in the same conductor task, with the node's automated_clean as it
		// is then (conductor/cleaning.py do_node_clean, utils.skip_automated_cleaning).
		if clean, _ := f.node["automated_clean"].(bool); clean {
			f.log = append(f.log, "clean")
			move("clean wait", "available")
		} else {
			move("available", "")
		}
	default:
		f.t.Errorf("the fake cannot %s from %q", target, st)
	}
}

// TestPreparationStartAnsweredLate: Ironic started the manual cleaning but answered after the
// client's timeout (an error, the start not known to have happened). The node then seen cleaning
// with the preparation's fingerprint proves it started: back in manageable, the preparation is
// done, not run a second time (RAID, BIOS and firmware applied twice). A start Ironic never got
// is started again.
func TestPreparationStartAnsweredLate(t *testing.T) {
	data := provisioner.PrepareData{FirmwareUpdates: updates("bmc")}
	t.Run("started", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.115", map[string]any{"provision_state": "manageable"})
		ctx := context.Background()
		f.late = 2 * clientTimeout
		if _, err := p.Prepare(ctx, host, data, false); !isUnavailable(err) {
			t.Fatalf("start answered after the timeout: %v, want ErrUnavailable", err)
		}
		f.late = 0
		if res, err := p.Prepare(ctx, host, data, false); err != nil || !res.Busy {
			t.Fatalf("the node in clean wait: %s, %v, want a wait", describe(res), err)
		}
		f.set(p, map[string]any{"provision_state": "manageable", "target_provision_state": nil})
		if res, err := p.Prepare(ctx, host, data, false); err != nil || res.Busy || res.Failed() {
			t.Fatalf("the cleaning over: %s, %v, want done", describe(res), err)
		}
		if got := f.requests(); got != "PATCH, clean" {
			t.Errorf("requests %q, want one cleaning", got)
		}
	})
	t.Run("never got", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.115", map[string]any{"provision_state": "manageable"})
		ctx := context.Background()
		f.late, f.ignore = 2*clientTimeout, true
		if _, err := p.Prepare(ctx, host, data, false); !isUnavailable(err) {
			t.Fatalf("start without an answer: %v, want ErrUnavailable", err)
		}
		f.late, f.ignore = 0, false
		if res, err := p.Prepare(ctx, host, data, false); err != nil || !res.Busy {
			t.Fatalf("the node still manageable: %s, %v, want the cleaning started", describe(res), err)
		}
		if got := f.requests(); got != "PATCH, clean, clean" {
			t.Errorf("requests %q, want the cleaning asked again", got)
		}
	})
	// The operator restarted before asking again (or stopped between writing the fingerprint and
	// asking): the node, manageable since the fingerprint was written, never started it. Taken for
	// finished, the host went available with nothing applied.
	t.Run("never got, operator restarted", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.115", map[string]any{"provision_state": "manageable"})
		ctx := context.Background()
		f.late, f.ignore = 2*clientTimeout, true
		if _, err := p.Prepare(ctx, host, data, false); !isUnavailable(err) {
			t.Fatalf("start without an answer: %v, want ErrUnavailable", err)
		}
		f.late, f.ignore = 0, false
		if res, err := f.restarted(t).Prepare(ctx, host, data, false); err != nil || !res.Busy {
			t.Fatalf("after a restart, the node still manageable: %s, %v, want the cleaning started", describe(res), err)
		}
		if got := f.requests(); got != "PATCH, clean, clean" {
			t.Errorf("requests %q, want the cleaning asked again", got)
		}
		// Finished (manageable again, its state changed since): done, also after a restart.
		f.set(p, map[string]any{"provision_state": "manageable", "target_provision_state": nil})
		if res, err := f.restarted(t).Prepare(ctx, host, data, false); err != nil || res.Busy || res.Failed() {
			t.Fatalf("the cleaning over, after a restart: %s, %v, want done", describe(res), err)
		}
		if got := f.requests(); got != "PATCH, clean, clean" {
			t.Errorf("requests %q, want no third cleaning", got)
		}
	})
}

// TestServiceStartAnsweredLate: as TestPreparationStartAnsweredLate, for servicing: a servicing
// Ironic started but answered late, seen waiting and then failed, is reported failed, not started
// again.
func TestServiceStartAnsweredLate(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	p.base.HTTPClient.Timeout = clientTimeout // before the first call makes the session
	f.late = 2 * clientTimeout
	data := provisioner.ServiceData{FirmwareUpdates: updates("bios")}
	if _, err := p.Service(context.Background(), host, data); !isUnavailable(err) {
		t.Fatalf("start answered after the timeout: %v, want ErrUnavailable", err)
	}
	f.late = 0
	f.set(p, "service wait", "active", "")
	if res := service(t, p, host, data); !res.Busy {
		t.Fatalf("the node in service wait: %+v, want a wait", res)
	}
	f.set(p, "service failed", "active", "firmware update failed")
	if res := service(t, p, host, data); !res.Failed() {
		t.Fatalf("the servicing failed: %+v, want the failure reported", res)
	}
	if got := f.requests(); strings.Count(got, "service") != 1 {
		t.Errorf("requests %q, want one servicing", got)
	}
}

// TestRebootAnsweredLate: Ironic took a reboot but answered after the client's timeout. The node
// seen rebooting proves it: once the reboot ends, the reboot is done, not asked again. A reboot
// Ironic never got is asked again.
func TestRebootAnsweredLate(t *testing.T) {
	t.Run("taken", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.115", map[string]any{"provision_state": "active"})
		ctx := context.Background()
		f.late = 2 * clientTimeout
		if _, err := p.Reboot(ctx, host, metal3.RebootModeHard); !isUnavailable(err) {
			t.Fatalf("reboot answered after the timeout: %v, want ErrUnavailable", err)
		}
		f.late = 0
		if res, err := p.Reboot(ctx, host, metal3.RebootModeHard); err != nil || !res.Busy {
			t.Fatalf("the node rebooting: %s, %v, want a wait", describe(res), err)
		}
		f.set(p, map[string]any{"target_power_state": nil})
		if res, err := p.Reboot(ctx, host, metal3.RebootModeHard); err != nil || res.Busy || res.Failed() {
			t.Fatalf("the reboot over: %s, %v, want done", describe(res), err)
		}
		if got := f.requests(); got != "power rebooting" {
			t.Errorf("requests %q, want one reboot", got)
		}
	})
	t.Run("never got", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.115", map[string]any{"provision_state": "active"})
		ctx := context.Background()
		f.late, f.ignore = 2*clientTimeout, true
		if _, err := p.Reboot(ctx, host, metal3.RebootModeHard); !isUnavailable(err) {
			t.Fatalf("reboot without an answer: %v, want ErrUnavailable", err)
		}
		f.late, f.ignore = 0, false
		if res, err := p.Reboot(ctx, host, metal3.RebootModeHard); err != nil || !res.Busy {
			t.Fatalf("the node not rebooting: %s, %v, want the reboot asked", describe(res), err)
		}
		if got := f.requests(); got != "power rebooting, power rebooting" {
			t.Errorf("requests %q, want the reboot asked again", got)
		}
	})
}

// TestDeprovisionFromDeployWait: a host deleted while its deployment waits for the agent (wait
// call-back), whose cleaning settings changed since (cleaning disabled, or a new agent image).
// Ironic refuses any PATCH there (409) until its callback timeout, 30 minutes, and the undeploy it
// takes cleans at once with the node's automated_clean as it is. With API 1.110 the deployment is
// aborted (deploy failed), the settings written there, then undeployed: disabled cleaning does
// not clean. Without the abort, a new agent image alone does not hold the undeploy back; a
// changed automated_clean waits, saying why, rather than clean against the host's setting.
func TestDeprovisionFromDeployWait(t *testing.T) {
	ctx := context.Background()
	deployWait := map[string]any{"provision_state": "wait call-back", "target_provision_state": "active", "automated_clean": true}
	t.Run("cleaning disabled, abort", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.115", deployWait)
		host.AutomatedCleaningMode = metal3.CleaningModeDisabled
		if res, err := p.Deprovision(ctx, host, false); err != nil || !res.Busy {
			t.Fatalf("deprovisioning from wait call-back: %s, %v, want working", describe(res), err)
		}
		if got := f.requests(); got != "abort" {
			t.Fatalf("requests %q, want the deployment aborted (no PATCH Ironic refuses)", got)
		}
		p.watch.Writing(statesFakeUUID)()
		if res, err := p.Deprovision(ctx, host, false); err != nil || !res.Busy {
			t.Fatalf("deprovisioning from deploy failed: %s, %v, want working", describe(res), err)
		}
		p.watch.Writing(statesFakeUUID)()
		if res, err := p.Deprovision(ctx, host, false); err != nil || res.Busy || res.Failed() {
			t.Fatalf("deprovisioning once available: %s, %v, want done", describe(res), err)
		}
		if got := f.requests(); got != "abort, PATCH, deleted" {
			t.Errorf("requests %q, want abort, PATCH, deleted and no cleaning", got)
		}
		if got := f.field("automated_clean"); got != false {
			t.Errorf("automated_clean %v, want false", got)
		}
	})
	t.Run("cleaning disabled, no abort", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.109", deployWait)
		host.AutomatedCleaningMode = metal3.CleaningModeDisabled
		res, err := p.Deprovision(ctx, host, false)
		if err != nil || !res.Busy || !strings.Contains(res.Waiting, "automated_clean") {
			t.Fatalf("deprovisioning from wait call-back, API 1.109: %+v, %v, want a wait that says why", res, err)
		}
		if got := f.requests(); got != "" {
			t.Errorf("requests %q, want none (a PATCH is refused, an undeploy would clean)", got)
		}
	})
	t.Run("new agent image, no abort", func(t *testing.T) {
		f, p, host := newStatesFake(t, "1.109", deployWait)
		f.node["driver_info"] = map[string]any{"deploy_kernel": "http://old/k", "deploy_ramdisk": "http://old/r"}
		host.PreprovisioningImage = &provisioner.PreprovisioningImage{ImageURL: "http://new/r", KernelURL: "http://new/k", Format: metal3.ImageFormatInitRD}
		if res, err := p.Deprovision(ctx, host, false); err != nil || !res.Busy {
			t.Fatalf("deprovisioning from wait call-back: %s, %v, want working", describe(res), err)
		}
		if got := f.requests(); got != "deleted, clean" {
			t.Errorf("requests %q, want the undeploy and its cleaning (no PATCH Ironic refuses)", got)
		}
	})
}

// TestPreparationAfterProvisioningRuns: the preparation's fingerprint lasts until the node is
// provided. A preparation with the same steps after a provisioning and deprovisioning (the
// firmware changed since by a live update, or behind the operator's back) runs again; it was
// once reported done without running, and its firmware updates recorded as applied.
func TestPreparationAfterProvisioningRuns(t *testing.T) {
	f, p, host := newStatesFake(t, "1.115", map[string]any{"provision_state": "manageable", "automated_clean": false})
	host.AutomatedCleaningMode = metal3.CleaningModeDisabled
	ctx := context.Background()
	data := provisioner.PrepareData{FirmwareUpdates: updates("bmc")}
	if res, err := p.Prepare(ctx, host, data, false); err != nil || !res.Busy {
		t.Fatalf("preparing: %s, %v, want the cleaning started", describe(res), err)
	}
	f.set(p, map[string]any{"provision_state": "manageable", "target_provision_state": nil})
	if res, err := p.Prepare(ctx, host, data, false); err != nil || res.Busy || res.Failed() {
		t.Fatalf("the cleaning over: %s, %v, want done", describe(res), err)
	}
	image := provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/a.qcow2", Checksum: "http://i/a.qcow2.sha256sum"}}
	if res, err := p.Provision(ctx, host, image, false); err != nil || !res.Busy {
		t.Fatalf("provisioning: %s, %v, want the node provided", describe(res), err)
	}
	if extra := f.field("extra").(map[string]any); extra[extraPrepared] != nil {
		t.Errorf("extra after provide: %v, want no %s", extra, extraPrepared)
	}
	// Deployed, changed, deprovisioned: available again (no cleaning).
	f.set(p, map[string]any{"provision_state": "available"})
	if res, err := p.Prepare(ctx, host, data, false); err != nil || !res.Busy {
		t.Fatalf("the same preparation after deprovisioning: %s, %v, want it started (manage first)", describe(res), err)
	}
	if got := f.requests(); got != "PATCH, clean, PATCH, provide, manage" {
		t.Errorf("requests %q, want the preparation, the provide and a manage for the new preparation", got)
	}
}
