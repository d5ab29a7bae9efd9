package ironic

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestAgentLost(t *testing.T) {
	now := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	after := 5 * time.Minute
	quietFor := func(d time.Duration) func(*nodes.Node) {
		return func(n *nodes.Node) { n.ProvisionUpdatedAt = now.Add(-d) }
	}
	info := func(kv ...any) func(*nodes.Node) {
		return func(n *nodes.Node) {
			n.DriverInternalInfo = map[string]any{}
			for i := 0; i < len(kv); i += 2 {
				n.DriverInternalInfo[kv[i].(string)] = kv[i+1]
			}
		}
	}
	// Ironic's API masks the token's value; the key is what tells.
	token := info("agent_secret_token", "******")
	heartbeat := func(ago time.Duration) string { return now.Add(-ago).Format("2006-01-02T15:04:05.000000") }
	with, without := Features{DeployWaitAbort: true}, Features{}
	on := power(powerOn, "")
	for name, c := range map[string]struct {
		n     *nodes.Node
		f     Features
		quiet bool // agentQuiet: worth reading the node in full
		lost  bool
	}{
		"clean wait, token, silent 6 min":              {node(nodes.CleanWait, quietFor(6*time.Minute), token), with, true, true},
		"clean wait, token, silent 4 min":              {node(nodes.CleanWait, quietFor(4*time.Minute), token), with, false, false},
		"clean wait, no token (still booting)":         {node(nodes.CleanWait, quietFor(20*time.Minute), info()), with, true, false},
		"clean wait, pregenerated token (vmedia)":      {node(nodes.CleanWait, quietFor(20*time.Minute), info("agent_secret_token", "******", "agent_secret_token_pregenerated", "******")), with, true, false},
		"clean wait, pregenerated shown as true":       {node(nodes.CleanWait, quietFor(20*time.Minute), info("agent_secret_token", "x", "agent_secret_token_pregenerated", true)), with, true, false},
		"clean wait, pregenerated false":               {node(nodes.CleanWait, quietFor(20*time.Minute), info("agent_secret_token", "x", "agent_secret_token_pregenerated", false)), with, true, true},
		"clean wait, old heartbeat of an earlier boot": {node(nodes.CleanWait, quietFor(6*time.Minute), info("agent_secret_token", "******", "agent_last_heartbeat", heartbeat(time.Hour))), with, true, true},
		"clean wait, heartbeat 1 min ago":              {node(nodes.CleanWait, quietFor(6*time.Minute), info("agent_secret_token", "******", "agent_last_heartbeat", heartbeat(time.Minute))), with, true, false},
		"deploy wait, token, 1.110":                    {node(nodes.DeployWait, quietFor(6*time.Minute), token), with, true, true},
		"deploy wait, token, no abort":                 {node(nodes.DeployWait, quietFor(6*time.Minute), token), without, true, false},
		"service wait, token":                          {node(nodes.ServiceWait, quietFor(time.Hour), token), with, true, true},
		"inspect wait, token":                          {node(nodes.InspectWait, quietFor(time.Hour), token), with, false, false},
		"cleaning (conductor works), token":            {node(nodes.Cleaning, quietFor(time.Hour), token), with, false, false},
		"clean wait, no provision_updated_at":          {node(nodes.CleanWait, token), with, false, false},
		// No token, the server on and not powered since its agent last heartbeat: that agent
		// runs with a token Ironic wiped (orphanedAgent).
		"clean wait, orphaned agent": {node(nodes.CleanWait, quietFor(6*time.Minute), on,
			info("agent_last_heartbeat", heartbeat(7*time.Minute), "last_power_state_change", heartbeat(20*time.Minute))), with, true, true},
		"clean wait, orphaned agent, heartbeat 1 min ago": {node(nodes.CleanWait, quietFor(6*time.Minute), on,
			info("agent_last_heartbeat", heartbeat(time.Minute), "last_power_state_change", heartbeat(20*time.Minute))), with, true, false},
		"clean wait, no token, rebooted since (booting)": {node(nodes.CleanWait, quietFor(6*time.Minute), on,
			info("agent_last_heartbeat", heartbeat(20*time.Minute), "last_power_state_change", heartbeat(7*time.Minute))), with, true, false},
		"deploy wait, orphaned agent, no abort": {node(nodes.DeployWait, quietFor(6*time.Minute), on,
			info("agent_last_heartbeat", heartbeat(7*time.Minute))), without, true, false},
	} {
		if got := agentQuiet(c.n, now, after); got != c.quiet {
			t.Errorf("%s: agentQuiet = %t, want %t", name, got, c.quiet)
		}
		if got := agentLost(c.n, c.f, now, after); got != c.lost {
			t.Errorf("%s: agentLost = %t, want %t", name, got, c.lost)
		}
		if agentLost(c.n, c.f, now, 0) || agentQuiet(c.n, now, 0) {
			t.Errorf("%s: AgentLostAfter 0 must turn the check off", name)
		}
	}
}

// TestOrphanedAgent: a server on, with no agent token stored and no power action since its agent
// last heartbeat, still runs an agent Ironic refuses; anything else is not.
func TestOrphanedAgent(t *testing.T) {
	at := func(min int) string {
		return time.Date(2026, 11, 29, 4, min, 0, 0, time.UTC).Format("2006-01-02T15:04:05.000000")
	}
	n := func(power string, disabled bool, kv ...string) *nodes.Node {
		info := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			info[kv[i]] = kv[i+1]
		}
		return &nodes.Node{PowerState: power, DisablePowerOff: disabled, DriverInternalInfo: info}
	}
	pending := func(n *nodes.Node) *nodes.Node { n.TargetPowerState = powerOff; return n }
	for name, c := range map[string]struct {
		n    *nodes.Node
		want bool
	}{
		"heartbeat after the last power change":      {n(powerOn, false, "agent_last_heartbeat", at(5), "last_power_state_change", at(2)), true},
		"heartbeat, no power change recorded":        {n(powerOn, false, "agent_last_heartbeat", at(5)), true},
		"token stored (a live agent Ironic accepts)": {n(powerOn, false, "agent_last_heartbeat", at(5), "agent_secret_token", "******"), false},
		"powered since the heartbeat (a new boot)":   {n(powerOn, false, "agent_last_heartbeat", at(5), "last_power_state_change", at(6)), false},
		"power change at the heartbeat's time":       {n(powerOn, false, "agent_last_heartbeat", at(5), "last_power_state_change", at(5)), false},
		"server off":                                 {n(powerOff, false, "agent_last_heartbeat", at(5)), false},
		"power off under way":                        {pending(n(powerOn, false, "agent_last_heartbeat", at(5))), false},
		"power off disabled (spec.disablePowerOff)":  {n(powerOn, true, "agent_last_heartbeat", at(5)), false},
		"no heartbeat ever":                          {n(powerOn, false, "last_power_state_change", at(2)), false},
		"unreadable power change time":               {n(powerOn, false, "agent_last_heartbeat", at(5), "last_power_state_change", "yesterday"), false},
	} {
		if got := orphanedAgent(c.n); got != c.want {
			t.Errorf("%s: orphanedAgent = %t, want %t", name, got, c.want)
		}
	}
}

func TestParseIronicTime(t *testing.T) {
	want := time.Date(2026, 11, 24, 12, 53, 9, 531000000, time.UTC)
	for _, s := range []string{"2026-11-24T12:53:09.531000", "2026-11-24T12:53:09.531Z", "2026-11-24T12:53:09.531+00:00"} {
		got, err := parseIronicTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseIronicTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := parseIronicTime("yesterday"); err == nil {
		t.Error("parseIronicTime accepted \"yesterday\"")
	}
}

// TestLostAgentAbortedOncePerWindow: a node's wait is aborted for a lost agent once; a second lost
// agent within lostAgentRetryWindow is left to Ironic's callback timeout (whose failure the host
// reports), and after the window it is aborted again.
func TestLostAgentAbortedOncePerWindow(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0002"
	now := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	// quietSince is what the fake Ironic answers for provision_updated_at; the test moves it.
	var quietSince atomic.Value
	quietSince.Store(now.Add(-10 * time.Minute).Format(time.RFC3339))
	var aborts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case answerVersion(w, r):
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodGet:
			_, _ = fmt.Fprintf(w, `{"uuid": %q, "provision_state": "clean wait", "target_provision_state": "available",
				"provision_updated_at": %q, "driver_internal_info": {"agent_secret_token": "******"}}`, uuid, quietSince.Load())
		case r.URL.Path == "/v1/nodes/"+uuid+"/states/provision" && r.Method == http.MethodPut:
			body, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(body), `"abort"`) {
				t.Errorf("provision state change %s, want abort", body)
			}
			aborts.Add(1)
			w.WriteHeader(http.StatusAccepted)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return now }
	ctx := context.Background()
	s, err := p.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := node(nodes.CleanWait, func(n *nodes.Node) { n.UUID, n.ProvisionUpdatedAt = uuid, now.Add(-10*time.Minute) })

	try := func(when string, wantHandled bool, wantAborts int32) {
		t.Helper()
		_, handled, err := p.abortLostAgent(ctx, s, n, "deprovisioning")
		if err != nil || handled != wantHandled || aborts.Load() != wantAborts {
			t.Errorf("%s: handled %t, %v, %d aborts; want handled %t, %d aborts", when, handled, err, aborts.Load(), wantHandled, wantAborts)
		}
	}
	try("first lost agent", true, 1)
	try("again within the window", false, 1)
	now = now.Add(lostAgentRetryWindow + time.Minute)
	n.ProvisionUpdatedAt = now.Add(-10 * time.Minute)
	quietSince.Store(n.ProvisionUpdatedAt.Format(time.RFC3339))
	try("after the window", true, 2)
}
