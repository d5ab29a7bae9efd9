// Package fault holds bmcsim's fault injection: what can go wrong on a simulated server, set for the
// whole data center or per server, and changed at runtime through the control endpoint.
package fault

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync/atomic"
)

// Set is one set of faults. The zero value injects nothing.
type Set struct {
	// ErrorRate is the share (0..1) of Redfish calls answered with 500 Internal Server Error.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// TimeoutRate is the share (0..1) of Redfish calls that are never answered: the connection stays
	// open until the client gives up, then it is dropped.
	TimeoutRate float64 `json:"timeoutRate,omitempty"`
	// WrongCredentials makes the BMC reject its real password (basic auth, new and existing sessions)
	// until the fault is cleared, as if someone changed the password on the BMC.
	WrongCredentials bool `json:"wrongCredentials,omitempty"`
	// Password, when set, is the BMC's password from now on, as if an administrator changed it on
	// the BMC: the server's own password and every session opened with another password are
	// rejected (401) until the fault is cleared.
	Password string `json:"password,omitempty"`
	// IgnorePowerOn makes power-on requests succeed on the wire while the server stays off.
	IgnorePowerOn bool `json:"ignorePowerOn,omitempty"`
	// FailPowerOn makes every reset that would power the server on (On, a restart of a running
	// server, the power button of an off one) answer 500 and change nothing, as a BMC whose power
	// controller errs; power-off requests work.
	FailPowerOn bool `json:"failPowerOn,omitempty"`
	// FailDeploy makes the server's agent crash in the middle of a deploy (agent.Machine.FailDeploy).
	FailDeploy bool `json:"failDeploy,omitempty"`
	// LoseAgentToken makes the server's agent lose the answer to the lookup that hands out its
	// token (agent.Machine.LoseAgentToken), as when Ironic dies between storing the token and
	// answering: Ironic keeps the token and masks it in every later answer, so the agent looks
	// itself up again and again and never heartbeats.
	LoseAgentToken bool `json:"loseAgentToken,omitempty"`
	// FailFirmwareUpdate makes firmware updates end in TaskState Exception, versions unchanged.
	FailFirmwareUpdate bool `json:"failFirmwareUpdate,omitempty"`
	// RejectBIOSSetting names a BIOS attribute the BMC refuses to change: a settings PATCH that
	// includes it answers 400 (as some BMCs refuse settings their registry lists, for a license
	// or a dependency), and nothing of that PATCH is applied.
	RejectBIOSSetting string `json:"rejectBIOSSetting,omitempty"`
}

// Validate reports a Set with rates outside 0..1.
func (s Set) Validate() error {
	if s.ErrorRate < 0 || s.ErrorRate > 1 {
		return fmt.Errorf("errorRate %v is not between 0 and 1", s.ErrorRate)
	}
	if s.TimeoutRate < 0 || s.TimeoutRate > 1 {
		return fmt.Errorf("timeoutRate %v is not between 0 and 1", s.TimeoutRate)
	}
	if s.ErrorRate+s.TimeoutRate > 1 {
		return fmt.Errorf("errorRate + timeoutRate = %v is more than 1", s.ErrorRate+s.TimeoutRate)
	}
	return nil
}

// IsZero reports whether the set injects nothing.
func (s Set) IsZero() bool { return s == Set{} }

// Merge combines a global set with a server's own: flags are OR-ed, rates take the larger value,
// and the server's own password and rejected BIOS setting win over the global ones.
func Merge(global, server Set) Set {
	password := server.Password
	if password == "" {
		password = global.Password
	}
	return Set{
		Password:           password,
		ErrorRate:          max(global.ErrorRate, server.ErrorRate),
		TimeoutRate:        max(global.TimeoutRate, server.TimeoutRate),
		WrongCredentials:   global.WrongCredentials || server.WrongCredentials,
		IgnorePowerOn:      global.IgnorePowerOn || server.IgnorePowerOn,
		FailPowerOn:        global.FailPowerOn || server.FailPowerOn,
		FailDeploy:         global.FailDeploy || server.FailDeploy,
		LoseAgentToken:     global.LoseAgentToken || server.LoseAgentToken,
		FailFirmwareUpdate: global.FailFirmwareUpdate || server.FailFirmwareUpdate,
		RejectBIOSSetting:  cmp.Or(server.RejectBIOSSetting, global.RejectBIOSSetting),
	}
}

// Outcome is what a Redfish call should do under the current faults.
type Outcome int

// Outcomes of Roll.
const (
	Pass Outcome = iota
	Error
	Hang
)

// Snapshot is an immutable view of all faults.
type Snapshot struct {
	Global  Set            `json:"global"`
	Servers map[string]Set `json:"servers"`
}

// Injector holds the current faults. Reads are lock-free (every Redfish call reads them); writes
// replace the whole snapshot.
type Injector struct {
	cur atomic.Pointer[Snapshot]
}

// NewInjector starts with the given global faults.
func NewInjector(global Set) *Injector {
	i := &Injector{}
	i.cur.Store(&Snapshot{Global: global, Servers: map[string]Set{}})
	return i
}

// Snapshot returns the current faults; callers must not modify it.
func (i *Injector) Snapshot() *Snapshot { return i.cur.Load() }

// For returns the effective faults for a server (global merged with the server's own). An empty
// name gives the global faults.
func (i *Injector) For(server string) Set {
	s := i.cur.Load()
	if server == "" {
		return s.Global
	}
	return Merge(s.Global, s.Servers[server])
}

// SetGlobal replaces the global faults.
func (i *Injector) SetGlobal(set Set) error {
	if err := set.Validate(); err != nil {
		return err
	}
	for {
		old := i.cur.Load()
		next := &Snapshot{Global: set, Servers: old.Servers}
		if i.cur.CompareAndSwap(old, next) {
			return nil
		}
	}
}

// SetServer replaces one server's faults; a zero set removes them.
func (i *Injector) SetServer(server string, set Set) error {
	if err := set.Validate(); err != nil {
		return err
	}
	for {
		old := i.cur.Load()
		servers := maps.Clone(old.Servers)
		if set.IsZero() {
			delete(servers, server)
		} else {
			servers[server] = set
		}
		if i.cur.CompareAndSwap(old, &Snapshot{Global: old.Global, Servers: servers}) {
			return nil
		}
	}
}

// Clear removes every fault.
func (i *Injector) Clear() {
	i.cur.Store(&Snapshot{Servers: map[string]Set{}})
}

// Roll decides the fate of one Redfish call under set.
func Roll(set Set) Outcome {
	if set.ErrorRate == 0 && set.TimeoutRate == 0 {
		return Pass
	}
	r := rand.Float64()
	switch {
	case r < set.ErrorRate:
		return Error
	case r < set.ErrorRate+set.TimeoutRate:
		return Hang
	}
	return Pass
}
