package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// agentInstance is one boot of the agent on one server: it lives from power-on into the deploy
// image until the server powers off or reboots (Runner.Stop), or until it crashes by fault
// injection. A reboot starts a new instance with a new callback path and an empty command list,
// which is how Ironic recognises a freshly booted agent.
type agentInstance struct {
	r     *Runner
	m     Machine
	id    string
	boot  BootInfo
	api   *ironicClient
	hint  string // node UUID from a previous boot, sent with the lookup
	log   *slog.Logger
	ctx   context.Context
	stopF context.CancelFunc
	beat  chan struct{} // asks for an immediate heartbeat
	// hc reaches Ironic and the image server (skipping certificate checks with ipa-insecure=1).
	hc    *http.Client
	start time.Time

	mu          sync.Mutex
	token       string
	nodeUUID    string
	callbackURL string
	commands    []*command
	crashed     bool
	events      []string // for log.collect_system_logs
}

func newAgent(r *Runner, m Machine, bi BootInfo, apiURL, hint string) *agentInstance {
	ctx, cancel := context.WithCancel(context.Background())
	hc := r.hc
	if bi.Params["ipa-insecure"] == "1" {
		hc = r.insecure
	}
	a := &agentInstance{
		r:     r,
		m:     m,
		id:    randomHex(8),
		boot:  bi,
		hc:    hc,
		api:   newIronicClient(apiURL, hc),
		hint:  hint,
		ctx:   ctx,
		stopF: cancel,
		beat:  make(chan struct{}, 1),
		start: time.Now(),
		token: bi.Token,
	}
	a.log = r.cfg.Logger.With("machine", m.ID(), "agent", a.id)
	return a
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// event records a line for the agent's "system logs" and the bmcsim log.
func (a *agentInstance) event(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.log.Info(msg)
	a.mu.Lock()
	a.events = append(a.events, time.Now().UTC().Format(time.RFC3339Nano)+" "+msg)
	if len(a.events) > 500 {
		a.events = a.events[len(a.events)-500:]
	}
	a.mu.Unlock()
}

func (a *agentInstance) stop() {
	a.stopF()
	a.r.srv.unregister(a.id)
}

func (a *agentInstance) isCrashed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.crashed
}

// crash simulates the agent dying: no more heartbeats and no more answers on its API.
func (a *agentInstance) crash(reason string) {
	a.event("agent crashed: %s", reason)
	a.mu.Lock()
	a.crashed = true
	a.mu.Unlock()
}

func (a *agentInstance) tokenOK(t string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token == "" || t == a.token
}

func (a *agentInstance) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (a *agentInstance) run() {
	defer a.r.srv.unregister(a.id)
	if !a.sleep(a.r.cfg.BootDelay) {
		return
	}
	a.event("booted (api %s, token from image: %t, Ignition: %t, static addresses: %s)", a.api.base, a.boot.Token != "", a.boot.Ignition, describeNetwork(a.boot.Network))
	lk := a.lookup()
	if lk == nil {
		return
	}
	if a.shouldInspect(lk) {
		a.inspect()
	}
	a.callbackURL = a.r.srv.register(a)
	a.heartbeatLoop()
}

// lookup retries GET /v1/lookup until Ironic knows the server in a state that allows it.
func (a *agentInstance) lookup() *lookupResponse {
	macs := a.m.MACAddresses()
	wait := a.r.cfg.LookupInterval
	backoff := func() bool {
		d := wait
		wait = min(wait*3/2, a.r.cfg.LookupMaxInterval)
		return a.sleep(jittered(d))
	}
	for attempt := 0; ; attempt++ {
		// Whether this lookup's answer is lost is decided when it is sent: a fault cleared while
		// Ironic answers (after it stored the token) still applies to that answer, as the
		// failure it stands for (Ironic dying before its answer left) would.
		loseAnswer := a.m.LoseAgentToken()
		lk, err := a.api.lookup(a.ctx, macs, a.hint)
		if err == nil {
			// Ironic masks a token it pregenerated (it is then in the kernel parameters) or handed
			// out before.
			t := lk.Config.AgentToken
			fresh := t != "" && !strings.Contains(t, "*")
			lost := fresh && loseAnswer
			a.mu.Lock()
			a.nodeUUID = lk.Node.UUID
			if fresh && !lost {
				a.token = t
			}
			noToken := a.token == ""
			a.mu.Unlock()
			if lost {
				a.event("lookup answer with the agent token lost (fault injection)")
			}
			if noToken {
				// As IPA: the token is masked (it was handed out before, e.g. to the previous boot,
				// and Ironic has not wiped it yet) and the image has none. Heartbeats without it
				// are refused, so look up again until Ironic hands out a fresh one.
				if attempt == 0 || attempt%30 == 0 {
					a.event("lookup found node %s but no usable agent token yet; retrying", lk.Node.UUID)
				}
				if !backoff() {
					return nil
				}
				continue
			}
			a.r.rememberNode(a.m.ID(), lk.Node.UUID)
			a.event("lookup found node %s (token known: %t)", lk.Node.UUID, a.token != "")
			return lk
		}
		if a.ctx.Err() != nil {
			return nil
		}
		if statusOf(err) == http.StatusNotFound && a.hint != "" && attempt > 2 {
			a.hint = "" // the node may have been deleted and enrolled anew
		}
		if attempt == 0 || attempt%30 == 0 {
			a.event("lookup failed (attempt %d): %v", attempt+1, err)
		}
		if !backoff() {
			return nil
		}
	}
}

// jittered is d ± 20 %, so that agents booted together do not call Ironic in step.
func jittered(d time.Duration) time.Duration {
	return d*4/5 + mrand.N(d*2/5+1)
}

// shouldInspect: Ironic asks for inspection with ipa-inspection-callback-url when it builds the boot
// ISO; an image configured for it (a customized live image's ironic-python-agent.conf) names it
// in inspection_callback_url. ironic-python-agent inspects only with one: a customized image
// without it does not inspect here either. The project's own prebuilt deploy ISO stands for
// metal3's agent images, whose configuration carries the callback; the agent recognises an
// inspection in progress by the fields Ironic's inspect interface sets on the node for its
// duration (inspector_manage_boot, lookup_bmc_addresses), which the lookup answer carries.
func (a *agentInstance) shouldInspect(lk *lookupResponse) bool {
	if a.boot.InspectionCallbackURL != "" {
		return true
	}
	if a.boot.Ignition {
		return false
	}
	dii := lk.Node.DriverInternalInfo
	_, managed := dii["inspector_manage_boot"]
	_, cached := dii["lookup_bmc_addresses"]
	return managed || cached
}

func (a *agentInstance) inspect() {
	inv := a.m.Inventory()
	applyNetwork(&inv, a.boot.Network)
	data := map[string]any{
		"inventory":     inv,
		"root_disk":     rootDisk(inv),
		"configuration": map[string]any{"collectors": []string{"default", "logs"}, "managers": []map[string]string{{"name": "generic_hardware_manager", "version": "1.2"}}},
	}
	if len(inv.Interfaces) > 0 {
		boot := inv.Boot.PXEInterface
		if boot == "" {
			boot = inv.Interfaces[0].MACAddress
		}
		data["boot_interface"] = boot
	}
	url := a.boot.InspectionCallbackURL
	if url == "" {
		url = a.api.base + "/v1/continue_inspection"
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	url += sep + "node_uuid=" + a.nodeUUID
	for attempt := 1; attempt <= 5; attempt++ {
		resp, err := a.api.continueInspection(a.ctx, url, data)
		if err == nil {
			if t := resp.Config.AgentToken; t != "" && !strings.Contains(t, "*") {
				a.mu.Lock()
				a.token = t
				a.mu.Unlock()
			}
			a.event("inspection data sent (%d NICs, %d disks, %d CPUs, %d MiB)", len(inv.Interfaces), len(inv.Disks), inv.CPU.Count, inv.Memory.PhysicalMB)
			return
		}
		a.event("continue_inspection failed (attempt %d): %v", attempt, err)
		if s := statusOf(err); (s >= 400 && s < 500 && s != http.StatusConflict) || !a.sleep(a.r.cfg.LookupInterval) {
			return
		}
	}
}

func rootDisk(inv Inventory) any {
	if len(inv.Disks) == 0 {
		return nil
	}
	return inv.Disks[0]
}

// heartbeatLoop heartbeats on ironic-python-agent's schedule: the first at once, then every
// HeartbeatInterval ± 20 %; after a failed heartbeat again in one to two MinHeartbeatInterval; and
// when an async command ends (heartbeatNow) as soon as MinHeartbeatInterval has passed since the
// previous heartbeat. That floor matters: the previous heartbeat is usually what started the
// command, and the conductor may still hold the node's lock from handling it. Ironic drops a
// heartbeat that finds the node locked (with 202, so the agent cannot tell) and the step's end then
// waits a whole interval.
func (a *agentInstance) heartbeatLoop() {
	cfg := a.r.cfg
	var last time.Time     // zero: the first heartbeat goes at once
	var next time.Duration // planned gap after last
	forced := false
	for {
		due := last.Add(next)
		if floor := last.Add(cfg.MinHeartbeatInterval); forced && floor.Before(due) {
			due = floor
		}
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-a.ctx.Done():
				t.Stop()
				return
			case <-a.beat:
				t.Stop()
				forced = true
				continue
			case <-t.C:
			}
		}
		a.mu.Lock()
		crashed, uuid, token := a.crashed, a.nodeUUID, a.token
		a.mu.Unlock()
		if crashed {
			return
		}
		err := a.api.heartbeat(a.ctx, uuid, heartbeatRequest{
			CallbackURL: a.callbackURL, AgentToken: token, AgentVersion: cfg.AgentVersion,
			AgentVerifyCA: a.r.srv.certPEM,
		})
		last = time.Now()
		if err != nil {
			if a.ctx.Err() != nil {
				return
			}
			next = cfg.MinHeartbeatInterval + mrand.N(cfg.MinHeartbeatInterval+1)
			a.log.Debug("heartbeat failed", "node", uuid, "err", err)
			continue
		}
		forced = false
		next = jittered(cfg.HeartbeatInterval)
	}
}

// heartbeatNow asks for an early heartbeat, as IPA does when an async command ends, so Ironic
// notices the result without waiting for the next interval (see heartbeatLoop).
func (a *agentInstance) heartbeatNow() {
	select {
	case a.beat <- struct{}{}:
	default:
	}
}
