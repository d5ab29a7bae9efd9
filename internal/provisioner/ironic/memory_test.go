package ironic

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// remember fills in every kind of memory about node id, as the operations do.
func remember(m *nodeMemory, id string) {
	m.setAppliedCreds(id, "fp-creds")
	m.setPowerRequest(id, powerOff)
	m.setPowerUnanswered(id, rebooting)
	m.setRestartedManage(id, true)
	m.setBootPort(id, "52:54:00:00:00:01")
	m.recordStart(id, extraPrepared, "fp-steps", false)
	m.setLostAgentAbort(id, time.Unix(100, 0))
	m.setRecalledError(id, time.Unix(200, 0), "The servicing state can't be resumed")
	m.setStaleServiceRestart(id, true)
	m.setAbortRequested(id, time.Unix(300, 0), time.Unix(250, 0))
	m.setDataImageFailure(id, vmediaAttachFailed+" cdrom to node "+id+": HTTP 404")
}

// remembered reports whether the provisioner keeps anything about node id.
func remembered(p *Provisioner, id string) bool {
	p.memory.mu.Lock()
	defer p.memory.mu.Unlock()
	return p.memory.nodes[id] != nil
}

func TestNodeMemory(t *testing.T) {
	var m nodeMemory
	remember(&m, "a")
	remember(&m, "b")
	// remember must cover every field, or forget would not be tested on it.
	facts := reflect.ValueOf(*m.nodes["a"])
	for i := range facts.NumField() {
		if facts.Field(i).IsZero() {
			t.Errorf("nodeFacts.%s is not filled in by remember: add it there", facts.Type().Field(i).Name)
		}
	}

	if fp, known := m.appliedCreds("a"); !known || fp != "fp-creds" {
		t.Errorf("appliedCreds = %q %t", fp, known)
	}
	if got := m.powerRequest("a"); got != powerOff {
		t.Errorf("powerRequest = %q", got)
	}
	if got := m.powerUnanswered("a"); got != rebooting {
		t.Errorf("powerUnanswered = %q", got)
	}
	if got := m.bootPort("a"); got != "52:54:00:00:00:01" {
		t.Errorf("bootPort = %q", got)
	}
	if fp, failed := m.failedStart("a", extraPrepared); !failed || fp != "fp-steps" {
		t.Errorf("failedStart = %q %t", fp, failed)
	}
	if _, failed := m.failedStart("a", extraServiced); failed {
		t.Error("a failed start under one key shows under another")
	}
	if !m.lostAgentAbortedSince("a", time.Unix(100, 0)) || m.lostAgentAbortedSince("a", time.Unix(101, 0)) || m.lostAgentAbortedSince("c", time.Time{}) {
		t.Error("lostAgentAbortedSince: want the abort at 100 s seen from 100 s on, not after it, and none for an unknown node")
	}
	if text, known := m.recalledError("a", time.Unix(200, 0)); !known || text != "The servicing state can't be resumed" {
		t.Errorf("recalledError for the failure at 200 s = %q %t", text, known)
	}
	if _, known := m.recalledError("a", time.Unix(201, 0)); known {
		t.Error("recalledError: a reason remembered for one failure is given for a later one")
	}
	if _, ok := m.abortRequested("a", time.Unix(260, 0), time.Unix(300, 0)); !ok {
		t.Error("abortRequested: the abort asked at 300 s of a state dated 250 s not given for a failure dated 260 s")
	}
	if _, ok := m.abortRequested("a", time.Unix(250, 0), time.Unix(300, 0)); ok {
		t.Error("abortRequested: given for the state the abort was asked in (a failure no later than it)")
	}
	if _, ok := m.abortRequested("a", time.Unix(260, 0), time.Unix(301, 0)); ok {
		t.Error("abortRequested: given although asked before notBefore")
	}
	if !m.staleServiceRestarted("a") || m.staleServiceRestarted("c") {
		t.Error("staleServiceRestarted: want the mark for a, none for an unknown node")
	}
	if !m.takeRestartedManage("a") || m.takeRestartedManage("a") {
		t.Error("takeRestartedManage: want true once, then false (one restart per reported failure)")
	}

	m.forget("a")
	if _, known := m.appliedCreds("a"); known {
		t.Error("credentials fingerprint kept after forget")
	}
	if _, known := m.recalledError("a", time.Unix(200, 0)); m.powerRequest("a") != "" || m.bootPort("a") != "" || m.takeRestartedManage("a") || m.staleServiceRestarted("a") || known {
		t.Error("power request, boot port, restart marks or recalled error kept after forget")
	}
	if _, ok := m.abortRequested("a", time.Unix(260, 0), time.Time{}); ok {
		t.Error("abort request kept after forget")
	}
	if _, failed := m.failedStart("a", extraPrepared); failed {
		t.Error("failed start kept after forget")
	}
	if m.nodes["a"] != nil {
		t.Errorf("forget left an entry: %+v", *m.nodes["a"])
	}
	if got := m.powerRequest("b"); got != powerOff {
		t.Errorf("forgetting a left b's power request %q", got)
	}

	// A node with nothing left to remember takes no room; one with something left keeps it.
	m.setAppliedCreds("b", "")
	m.setPowerRequest("b", "")
	m.setRestartedManage("b", false)
	m.setBootPort("b", "")
	m.setLostAgentAbort("b", time.Time{})
	m.setRecalledError("b", time.Time{}, "")
	m.setStaleServiceRestart("b", false)
	m.clearAbortRequested("b")
	m.setDataImageFailure("b", "")
	if m.nodes["b"] == nil {
		t.Fatal("b dropped while a failed start is still remembered")
	}
	m.recordStart("b", extraPrepared, "fp-steps", true)
	if m.nodes["b"] != nil {
		t.Errorf("b kept with nothing to remember: %+v", *m.nodes["b"])
	}
}

// answerVersion answers the version document of an Ironic at API 1.115 when r asks for it.
func answerVersion(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/v1/" && r.URL.Path != "/v1" {
		return false
	}
	_, _ = fmt.Fprint(w, `{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": "1.1", "version": "1.115"}}`)
	return true
}

// fakeIronic answers for one manageable node: its version document, GET and DELETE of the node
// (DELETE answers 409 "locked" while locked is set).
func fakeIronic(t *testing.T, uuid, name string, locked *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case answerVersion(w, r):
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodGet:
			_, _ = fmt.Fprintf(w, `{"uuid": %q, "name": %q, "provision_state": "manageable", "power_state": "power off"}`, uuid, name)
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodDelete && locked.Load():
			w.WriteHeader(http.StatusConflict)
			_, _ = fmt.Fprintf(w, `{"error_message": "{\"faultstring\": \"Node %s is locked by host x, please retry after the current operation is completed.\"}"}`, uuid)
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDeleteForgetsTheNode: all the memory about a node goes when Ironic deleted it, and stays
// while Ironic refuses; the lines logged carry the keys of the caller's context logger.
func TestDeleteForgetsTheNode(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0001"
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid}
	var locked atomic.Bool
	locked.Store(true)
	srv := fakeIronic(t, uuid, nodeName(host), &locked)
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{}).WithValues("BareMetalHost", "ns/h")
	ctx := logr.NewContext(context.Background(), log)

	remember(&p.memory, uuid)
	remember(&p.memory, "another-node")
	res, err := p.Delete(ctx, host)
	if err != nil || !res.Busy {
		t.Fatalf("delete of a locked node: %s, %v; want working", describe(res), err)
	}
	if !remembered(p, uuid) {
		t.Error("the memory of a node Ironic did not delete was dropped")
	}

	locked.Store(false)
	if res, err := p.Delete(ctx, host); err != nil || res.Busy || res.Failed() {
		t.Fatalf("delete: %s, %v; want done", describe(res), err)
	}
	if remembered(p, uuid) {
		t.Errorf("memory kept after the node was deleted: %+v", *p.memory.nodes[uuid])
	}
	if !remembered(p, "another-node") {
		t.Error("deleting one node dropped another node's memory")
	}

	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range lines {
		if strings.Contains(l, "Removed the Ironic node") {
			found = true
			if !strings.Contains(l, `"BareMetalHost"="ns/h"`) || !strings.Contains(l, "ironic") {
				t.Errorf("log line without the context's keys or the ironic name: %s", l)
			}
		}
	}
	if !found {
		t.Errorf("no removal line in the context's logger; got %q", lines)
	}
}
