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
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// serviceFake is an Ironic that answers for one active node as servicing needs: GET, PATCH (of
// extra and driver_info keys; refused with 409 while a state change is in progress outside
// Ironic's UPDATE_ALLOWED_STATES, as Ironic does), provision state changes, an empty history and
// BIOS. The test moves the node through its states with set.
type serviceFake struct {
	t    *testing.T
	mu   sync.Mutex
	node map[string]any
	at   time.Time // provision_updated_at, moved by every state change
	// log lists the requests that change something, in order ("PATCH", "service", "abort").
	log []string
	// history is the node's history (GET /history), newest first.
	history []historyEvent
	// abortAfter is the step an abort lets end first (none of ours can be interrupted), "" none.
	abortAfter string
	// late: a provision state change is carried out at once and answered this much later.
	late time.Duration
}

const serviceFakeUUID = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0042"

// newServiceFake: Ironic's clock is ironicSkew behind the operator's (now).
func newServiceFake(t *testing.T, now time.Time, ironicSkew time.Duration) (*serviceFake, *Provisioner, provisioner.Host) {
	t.Helper()
	f := &serviceFake{t: t, at: now.Add(-ironicSkew), node: map[string]any{
		"uuid": serviceFakeUUID, "name": "ns~h", "provision_state": "active", "power_state": "power on",
		"extra": map[string]any{}, "driver_info": map[string]any{},
	}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return now }
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: serviceFakeUUID, BMCAddress: "redfish://192.0.2.1/redfish/v1/Systems/1"}
	return f, p, host
}

// set changes the node as Ironic would (a state change moves provision_updated_at) and makes the
// provisioner read it again.
func (f *serviceFake) set(p *Provisioner, state, target, lastError string) {
	f.mu.Lock()
	f.at = f.at.Add(time.Minute)
	f.node["provision_state"], f.node["target_provision_state"], f.node["last_error"] = state, target, lastError
	f.mu.Unlock()
	p.watch.Writing(serviceFakeUUID)() // reads before this one are out of date
}

// stepEnds ends the step an abort was asked during (abortAfter): continue_node_service fails the
// node and do_node_service_abort names the step and clears service_step, leaving the node in
// service failed.
func (f *serviceFake) stepEnds(p *Provisioner) {
	f.set(p, "service failed", "active", `By request, the service operation was aborted during or after the completion of step "`+f.abortAfter+`"`)
	f.abortAfter = ""
}

func (f *serviceFake) extra() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node["extra"].(map[string]any)
}

func (f *serviceFake) requests() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, " ")
}

func (f *serviceFake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	f.node["provision_updated_at"] = f.at.Format(time.RFC3339)
	path := strings.TrimPrefix(r.URL.Path, "/v1/nodes/"+serviceFakeUUID)
	switch {
	case answerVersion(w, r):
	case path == "" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(f.node)
	case path == "" && r.Method == http.MethodPatch:
		f.log = append(f.log, "PATCH")
		st := f.node["provision_state"].(string)
		if t, _ := f.node["target_provision_state"].(string); t != "" && st != "service failed" && st != "service hold" {
			w.WriteHeader(http.StatusConflict)
			_, _ = fmt.Fprintf(w, `{"error_message": "{\"faultstring\": \"Node %s can not be updated while a state transition is in progress.\"}"}`, serviceFakeUUID)
			return
		}
		var ops []struct {
			Op, Path string
			Value    any
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ops); err != nil {
			f.t.Errorf("PATCH %s: %v", body, err)
		}
		for _, op := range ops {
			field, key, _ := strings.Cut(strings.TrimPrefix(op.Path, "/"), "/")
			m := f.node[field].(map[string]any)
			if op.Op == "remove" {
				delete(m, key)
			} else {
				m[key] = op.Value
			}
		}
		_ = json.NewEncoder(w).Encode(f.node)
	case path == "/states/provision" && r.Method == http.MethodPut:
		var body struct{ Target string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		f.log = append(f.log, body.Target)
		switch body.Target {
		case "service":
			f.at = f.at.Add(time.Minute)
			f.node["provision_state"], f.node["target_provision_state"], f.node["last_error"] = "service wait", "active", nil
		case "abort":
			switch {
			case f.node["provision_state"] == "service wait" && f.abortAfter != "":
				// The step cannot be interrupted: _do_abort only marks it (abort_after), and the
				// node stays in service wait, its provision_updated_at unchanged, until the step
				// ends (stepEnds).
			default:
				f.at = f.at.Add(time.Minute) // service wait → service failed → active, or service failed → active
				f.node["provision_state"], f.node["target_provision_state"] = "active", nil
				f.node["last_error"] = "By request, the service operation was aborted" // service_step is None by then
			}
		}
		if late := f.late; late > 0 {
			f.mu.Unlock()
			time.Sleep(late) // after the client's timeout
			f.mu.Lock()
		}
		w.WriteHeader(http.StatusAccepted)
	case path == "/history":
		_ = json.NewEncoder(w).Encode(map[string]any{"history": f.history})
	case path == "/bios":
		_, _ = fmt.Fprint(w, `{"bios": []}`)
	default:
		http.NotFound(w, r)
	}
}

func updates(components ...string) []metal3.FirmwareUpdate {
	var out []metal3.FirmwareUpdate
	for _, c := range components {
		out = append(out, metal3.FirmwareUpdate{Component: c, URL: "http://fw.example/" + c + ".bin"})
	}
	return out
}

func service(t *testing.T, p *Provisioner, host provisioner.Host, data provisioner.ServiceData) provisioner.Result {
	t.Helper()
	res, err := p.Service(context.Background(), host, data)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestServiceRunOfTheAttempt: the run of the host's attempt (its Since) that finished is done with
// what it applied, whatever the request says by then (edited while it ran; asked again after the
// host recorded its updates and restarted before its status write), and however far Ironic's clock
// is behind the operator's: never started twice. A later attempt applies the request again.
func TestServiceRunOfTheAttempt(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, time.Hour)
	t1 := now.Add(-10 * time.Minute)
	bios := provisioner.ServiceData{FirmwareUpdates: updates("bios"), Since: t1}
	if res := service(t, p, host, bios); !res.Busy {
		t.Fatalf("start: %+v, want busy", res)
	}
	both := provisioner.ServiceData{FirmwareUpdates: updates("bios", "bmc"), Since: t1}
	if res := service(t, p, host, both); !res.Busy {
		t.Fatalf("edited while Ironic services: %+v, want busy", res)
	}
	f.set(p, "active", "", "")
	for _, when := range []string{"finished, the request edited meanwhile", "asked again (the status write failed)"} {
		res := service(t, p, host, both)
		if res.Busy || res.Failed() || res.Serviced == nil || len(res.Serviced.Updates) != 1 || res.Serviced.Updates[0].Component != "bios" {
			t.Fatalf("%s: %+v, want done with the bios update it applied", when, res)
		}
	}
	if got := f.requests(); got != "PATCH service" {
		t.Fatalf("requests %q, want one start", got)
	}
	// The policy no longer allows the updates: what ran is still reported.
	if res := service(t, p, host, provisioner.ServiceData{Since: t1}); res.Serviced == nil {
		t.Fatalf("the changes taken back after the run finished: %+v, want what it applied", res)
	}
	if res := service(t, p, host, provisioner.ServiceData{FirmwareUpdates: updates("bios", "bmc"), Since: now}); !res.Busy {
		t.Fatalf("a later attempt: %+v, want started", res)
	}
	if got := f.requests(); got != "PATCH service PATCH service" {
		t.Fatalf("requests %q, want the later attempt started", got)
	}
}

// TestServiceFailedRunIsNoSuccess: a failure reported for a run is kept with it, so that the node
// active again (an admin aborted the failed servicing; Ironic's power sync erased last_error) goes
// on reporting it to the host waiting after the failure, until the host retries with a new attempt.
func TestServiceFailedRunIsNoSuccess(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	t1 := now.Add(-10 * time.Minute)
	data := provisioner.ServiceData{FirmwareUpdates: updates("bios"), Since: t1}
	service(t, p, host, data)
	f.set(p, "service failed", "active", "firmware update failed")
	res := service(t, p, host, data)
	if !res.Failed() {
		t.Fatalf("service failed: %+v, want the failure", res)
	}
	waiting := provisioner.ServiceData{FirmwareUpdates: data.FirmwareUpdates, AfterFailure: true}
	f.set(p, "active", "", "By request, the service operation was aborted")
	for _, lastError := range []string{"By request, the service operation was aborted", ""} {
		f.set(p, "active", "", lastError)
		if got := service(t, p, host, waiting); got.ErrorMessage != res.ErrorMessage || got.Serviced != nil {
			t.Fatalf("active again after an admin's abort (last_error %q): %+v, want the failure %q", lastError, got, res.ErrorMessage)
		}
	}
	if got := service(t, p, host, provisioner.ServiceData{FirmwareUpdates: updates("bmc"), AfterFailure: true}); !got.Restart {
		t.Fatalf("changed changes after the failure: %+v, want Restart (nothing started)", got)
	}
	if got := f.requests(); got != "PATCH service PATCH" {
		t.Fatalf("requests %q, want one start and the failure recorded", got)
	}
	data.Since = now
	if got := service(t, p, host, data); !got.Busy {
		t.Fatalf("the host's retry: %+v, want started", got)
	}
}

// TestServiceAbortedRunStartsAgain: a run of the attempt that ended in an abort (the provisioner's
// own, for a lost agent: service wait → service failed → active) did not finish: it is started
// again, also once Ironic's power sync erased the abort's last_error.
func TestServiceAbortedRunStartsAgain(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	data := provisioner.ServiceData{FirmwareUpdates: updates("bios"), Since: now.Add(-10 * time.Minute)}
	service(t, p, host, data)
	f.set(p, "active", "", "By request, the service operation was aborted during or after the completion of step 'firmware.update'")
	if res := service(t, p, host, data); !res.Busy || res.Serviced != nil {
		t.Fatalf("aborted run: %+v, want started again", res)
	}
	// An abort asked (lost agent) whose last_error Ironic erased.
	f.set(p, "service wait", "active", "")
	f.mu.Lock()
	waitSince := f.at
	f.mu.Unlock()
	p.memory.setAbortRequested(serviceFakeUUID, now, waitSince)
	f.set(p, "active", "", "")
	if res := service(t, p, host, data); !res.Busy || res.Serviced != nil {
		t.Fatalf("aborted run, last_error erased: %+v, want started again", res)
	}
	if got := f.requests(); got != "PATCH service PATCH service PATCH service" {
		t.Fatalf("requests %q, want three starts", got)
	}
	// Aborted once its last step had ended (Ironic lets a step that cannot be interrupted end
	// first, and names it): finished, not flashed again.
	f.set(p, "active", "", `By request, the service operation was aborted during or after the completion of step "firmware.update"`)
	if res := service(t, p, host, data); res.Busy || res.Serviced == nil || f.requests() != "PATCH service PATCH service PATCH service" {
		t.Fatalf("aborted after its last step: %+v, requests %q; want done, nothing started", res, f.requests())
	}
}

// TestServiceTakenBackAbortsFirst: changes taken back while Ironic waits on the servicing abort it
// at once (Ironic refuses any PATCH then), and the request is forgotten once the node is active.
func TestServiceTakenBackAbortsFirst(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	t1 := now.Add(-10 * time.Minute)
	service(t, p, host, provisioner.ServiceData{FirmwareUpdates: updates("bios"), Since: t1})
	if res := service(t, p, host, provisioner.ServiceData{Since: t1}); !res.Busy {
		t.Fatalf("taken back in service wait: %+v, want busy", res)
	}
	if got := f.requests(); got != "PATCH service abort" {
		t.Fatalf("requests %q, want the abort asked at once", got)
	}
	if res := service(t, p, host, provisioner.ServiceData{Since: t1}); res.Busy || res.Failed() || res.Serviced != nil {
		t.Fatalf("abort over: %+v, want done, nothing applied", res)
	}
	if e := f.extra(); e[extraServiced] != nil || e[extraServiceRun] != nil {
		t.Fatalf("extra %v after the abort, want the request forgotten", e)
	}
}

// TestServiceTakenBackAfterItsStep: the changes taken back (or no longer allowed) while Ironic
// runs the firmware step, which cannot be interrupted: the abort takes effect once the update is
// flashed, leaving the node in service failed with the step named; the abort that takes it from
// there to active names no step. The run's record keeps the step before that abort, so that the
// finished abort says the update was flashed and the host records it (not "aborted, its changes
// were removed", which would flash it again when asked again).
func TestServiceTakenBackAfterItsStep(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	t1 := now.Add(-10 * time.Minute)
	service(t, p, host, provisioner.ServiceData{FirmwareUpdates: updates("bios"), Since: t1})
	f.abortAfter = "firmware.update"
	takeBack := provisioner.ServiceData{Since: t1}
	var res provisioner.Result
	// Asked once while the step runs: asking again (every few seconds, for the minutes a flash
	// takes) would only take Ironic's node lock for nothing.
	for range 3 {
		p.watch.Forget(serviceFakeUUID)
		if res = service(t, p, host, takeBack); !res.Busy {
			t.Fatalf("taken back while the step runs: %+v, want busy", res)
		}
	}
	if got := f.requests(); got != "PATCH service abort" {
		t.Fatalf("requests %q while the step runs, want one abort", got)
	}
	f.stepEnds(p)
	for range 4 {
		p.watch.Forget(serviceFakeUUID)
		if res = service(t, p, host, takeBack); !res.Busy {
			break
		}
	}
	if res.Busy || res.Failed() || res.Serviced == nil || len(res.Serviced.Updates) != 1 {
		t.Fatalf("abort after the flash: %+v, requests %q; want done, naming the update flashed", res, f.requests())
	}
	if got := f.requests(); got != "PATCH service abort PATCH abort" {
		t.Errorf("requests %q, want the step recorded in service failed before the second abort", got)
	}
	// Asked again (the host's status write failed): still the update flashed.
	if res := service(t, p, host, takeBack); res.Serviced == nil || len(res.Serviced.Updates) != 1 {
		t.Fatalf("asked again after the abort: %+v, want the update flashed", res)
	}
}

// TestRebootOfAFailedNode: Ironic clears last_error when it starts a reboot; the reason of the
// node's failed state, recalled from its history, is not the reboot's failure (a host whose power
// off is disabled, in service failed, was otherwise rebooted again after every backoff).
func TestRebootOfAFailedNode(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	f.set(p, "service failed", "active", "")
	f.history = []historyEvent{{CreatedAt: f.at.Add(-time.Minute).Format("2006-01-02T15:04:05"), Severity: "ERROR", Event: "Servicing failed: bios"}}
	p.memory.setPowerRequest(serviceFakeUUID, string(nodes.Rebooting)) // asked and accepted
	res, err := p.Reboot(context.Background(), host, metal3.RebootModeHard)
	if err != nil || res.Failed() || res.Busy {
		t.Fatalf("reboot of a node in service failed, Ironic done: %+v %v, want done", res, err)
	}
	if _, n, err := p.getNode(context.Background(), host); err != nil || n.LastError != "Servicing failed: bios" {
		t.Fatalf("the node's failure: %v %v, want it recalled for the provision decisions", n, err)
	}
}

// TestServiceAbortedAfterItsStepWithTheChangesBack: the changes taken back while the firmware step
// runs (the abort waits for the step, which cannot be interrupted) and put back before it ends:
// the node is left in service failed with the step named, having flashed everything asked. The
// run is finished: aborted on to active and done there with the update recorded, not started again
// from service failed (a second flash; a BMC refusing a same-version flash fails it).
func TestServiceAbortedAfterItsStepWithTheChangesBack(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 5*time.Minute)
	data := provisioner.ServiceData{FirmwareUpdates: updates("bios"), Since: now.Add(-10 * time.Minute)}
	service(t, p, host, data)
	f.abortAfter = "firmware.update"
	if res := service(t, p, host, provisioner.ServiceData{Since: data.Since}); !res.Busy {
		t.Fatalf("taken back while the step runs: %+v, want busy", res)
	}
	f.stepEnds(p)
	var res provisioner.Result
	for range 4 {
		p.watch.Forget(serviceFakeUUID)
		if res = service(t, p, host, data); !res.Busy {
			break
		}
	}
	if res.Busy || res.Failed() || res.Serviced == nil || len(res.Serviced.Updates) != 1 {
		t.Fatalf("put back before the step ended: %+v, requests %q; want done, naming the update flashed", res, f.requests())
	}
	if got := f.requests(); got != "PATCH service abort PATCH abort" {
		t.Errorf("requests %q, want the run aborted on to active, not started again", got)
	}
}

// TestServiceAbortKeptByTheRecord: a live update taken back while its BIOS step ran is aborted
// after that step (the firmware update never runs); the abort is in the run's record
// (abortedAfter) before the node goes on to active. An operator that restarts then, with
// last_error erased by Ironic's power sync, must still report the BIOS settings alone: reported
// whole, the update that never ran was recorded as applied and never asked again.
func TestServiceAbortKeptByTheRecord(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	since := now.Add(-10 * time.Minute)
	run := serviceRun{Since: attemptToken(since), StateSince: ironicStamp(now.Add(-9 * time.Minute)),
		Settings: []string{"ProcTurboMode"}, Updates: updates("bmc"), AbortedAfter: stepBIOSApply}
	n := &nodes.Node{UUID: serviceFakeUUID, ProvisionState: string(nodes.Active), ProvisionUpdatedAt: now.Add(-time.Minute),
		Extra: map[string]any{extraServiceRun: run.value()}}
	p := &Provisioner{now: func() time.Time { return now }} // a new process: nothing in memory
	f, _, hasRun := p.serviceFactsOf(n, provisioner.ServiceData{Since: since}, fingerprint(nil), false)
	if !hasRun || !f.current || !f.aborted {
		t.Fatalf("facts %+v (record read: %t): want this attempt's run, aborted", f, hasRun)
	}
	if f.partial == nil || len(f.partial.Settings) != 1 || len(f.partial.Updates) != 0 {
		t.Fatalf("applied before the abort: %+v, want the BIOS settings alone", f.partial)
	}
}
