package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/agent"
)

// Runner starts and stops the in-band agent. agent.NewRunner implements it; bmcsim works without
// one (servers then boot into nothing).
type Runner interface {
	// Boot is called when the server powered on into a deploy image: iso holds the fetched virtual
	// media (or HTTP boot) image, nil for a network (PXE) boot.
	Boot(m agent.Machine, iso []byte) error
	// Stop is called when the server powered off or reset away from the ramdisk.
	Stop(id string)
}

// Reset types (Redfish ResetType values) a server accepts.
const (
	ResetOn               = "On"
	ResetForceOff         = "ForceOff"
	ResetGracefulShutdown = "GracefulShutdown"
	ResetForceRestart     = "ForceRestart"
	ResetGracefulRestart  = "GracefulRestart"
	ResetPushPowerButton  = "PushPowerButton"
)

// ResetTypes lists them for AllowableValues.
var ResetTypes = []string{ResetOn, ResetForceOff, ResetGracefulShutdown, ResetForceRestart, ResetGracefulRestart, ResetPushPowerButton}

// ErrInvalid marks a request the BMC rejects as bad input (HTTP 400).
var ErrInvalid = errors.New("invalid request")

// ErrNotFound marks a request for something that does not exist (HTTP 404).
var ErrNotFound = errors.New("not found")

// ErrPowerFault is the FailPowerOn fault's answer to a power on (HTTP 500).
var ErrPowerFault = errors.New("the power controller failed to power the server on (injected fault)")

// ErrConflict marks a request that conflicts with the current state (HTTP 409).
var ErrConflict = errors.New("conflict")

// ErrPrecondition marks a change refused by its Precondition (HTTP 412).
var ErrPrecondition = errors.New("precondition failed")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Reset performs a ComputerSystem.Reset.
//
// Semantics: On powers on an off server (no-op when on); ForceOff and GracefulShutdown power off
// (no-op when off); ForceRestart and GracefulRestart reboot a running server and power on an off
// one; PushPowerButton toggles. Every power-on is a boot: pending BIOS settings, firmware updates
// and OnReset volume operations apply, the boot device is chosen, and a Once override reverts to
// Disabled. With the IgnorePowerOn fault the request is accepted and nothing powers on; with
// FailPowerOn it fails with ErrPowerFault and nothing changes.
func (s *Server) Reset(resetType string) error {
	s.mu.Lock()
	on := s.st.Power == PowerOn
	var off, boot bool
	switch resetType {
	case ResetOn:
		boot = !on
	case ResetForceOff, ResetGracefulShutdown:
		off = on
	case ResetForceRestart, ResetGracefulRestart:
		off, boot = on, true
	case ResetPushPowerButton:
		off, boot = on, !on
	default:
		s.mu.Unlock()
		return invalid("ResetType %q is not one of %v", resetType, ResetTypes)
	}
	faults := s.fleet.Faults.For(s.Name)
	if boot && faults.FailPowerOn {
		s.mu.Unlock()
		return ErrPowerFault
	}
	if boot && faults.IgnorePowerOn {
		boot = false
	}
	var ops []runOp
	if off {
		ops = append(ops, s.powerOffLocked())
	}
	var start *runOp
	if boot {
		op := s.powerOnLocked()
		start = &op
	}
	s.mu.Unlock()
	if off || boot {
		s.fleet.markDirty()
	}
	for _, op := range ops {
		s.enqueue(op)
	}
	if start != nil {
		s.scheduleBoot(*start)
	}
	return nil
}

// powerOffLocked turns the server off and returns the queue op that stops its agent.
func (s *Server) powerOffLocked() runOp {
	s.st.Power = PowerOff
	s.st.Booted, s.st.BootedImage = "", ""
	s.gen++
	return runOp{stop: true, gen: s.gen}
}

// powerOnLocked turns the server on, which is a boot: it applies what waits for a reset, picks the
// boot device and returns the op that starts the agent when the device holds a deploy image.
func (s *Server) powerOnLocked() runOp {
	s.st.Power = PowerOn
	s.gen++
	s.applyOnResetLocked(false)
	s.st.SecureBootCurrent = s.st.SecureBoot
	dev, image := s.bootDeviceLocked()
	if s.st.Boot.Enabled == BootOnce {
		// Real BMCs clear a one-time override once the server used it; sushy relies on this and
		// only PATCHes fields that differ from what it last read.
		s.st.Boot.Enabled = BootDisabled
	}
	s.st.Booted, s.st.BootedImage = dev, image
	return runOp{gen: s.gen, dev: dev, image: image}
}

// bootDeviceLocked picks what the server boots: the override target when one is enabled, falling
// back (like firmware does) through its boot order when the target has nothing to boot. The boot
// order is the disk when an image was written, then an inserted virtual CD (BMCs add virtual media
// to the UEFI boot order while it is inserted), then nothing: network boot only happens when asked
// for, so idle servers never start agents nobody waits for. Ironic's fast track relies on the CD
// fallback: it reboots a server whose agent it lost without setting the boot device again.
func (s *Server) bootDeviceLocked() (dev, image string) {
	b := s.st.Boot
	target := TargetNone
	if b.Enabled == BootOnce || b.Enabled == BootContinuous {
		target = b.Target
	}
	switch target {
	case TargetCd:
		if m := s.st.Media[MediaCd]; m.Inserted && m.Image != "" {
			return TargetCd, m.Image
		}
	case TargetPxe:
		return TargetPxe, ""
	case TargetUefiHTTP:
		return TargetUefiHTTP, b.HTTPBootURI
	case TargetBiosSetup:
		return TargetBiosSetup, ""
	}
	if s.st.DiskImage != "" {
		return TargetHdd, ""
	}
	if m := s.st.Media[MediaCd]; m.Inserted && m.Image != "" {
		return TargetCd, m.Image
	}
	return "", ""
}

// runsAgent reports whether a boot device starts the agent.
func runsAgent(dev string) bool {
	return dev == TargetCd || dev == TargetPxe || dev == TargetUefiHTTP
}

// runOp is one step on a server's run queue: stop the agent, or boot it (if the server is still in
// the power cycle gen when the step runs). A stop's gen is that of its power-off: callers queue
// their steps after releasing the server's lock, so the stop of a power-off can reach the queue
// after the boot of a later power-on (the agent's own PowerOff racing a Reset On), and must then
// leave that boot's agent alone.
type runOp struct {
	stop  bool
	gen   uint64
	dev   string
	image string
}

// scheduleBoot starts the agent after the configured boot time (POST and ramdisk boot), unless the
// server was powered off or reset in the meantime.
func (s *Server) scheduleBoot(op runOp) {
	if !runsAgent(op.dev) {
		return
	}
	delay := s.fleet.cfg.BootTime.Duration
	if delay <= 0 {
		s.enqueue(op)
		return
	}
	time.AfterFunc(delay, func() { s.enqueue(op) })
}

func (s *Server) enqueue(op runOp) {
	if s.fleet.runner == nil {
		return
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.fleet.isClosed() && !op.stop {
		return
	}
	s.queue = append(s.queue, op)
	if !s.qrunning {
		s.qrunning = true
		s.fleet.workers.Add(1)
		go s.drain()
	}
}

func (s *Server) drain() {
	defer s.fleet.workers.Done()
	for {
		s.qmu.Lock()
		if len(s.queue) == 0 {
			s.qrunning = false
			s.qmu.Unlock()
			return
		}
		op := s.queue[0]
		s.queue = s.queue[1:]
		s.qmu.Unlock()
		s.run(op)
	}
}

func (s *Server) run(op runOp) {
	r := s.fleet.runner
	if op.stop {
		if s.agentRunning && s.agentGen <= op.gen {
			r.Stop(s.id)
			s.agentRunning = false
		}
		return
	}
	if !s.current(op.gen) {
		return
	}
	var iso []byte
	if op.image != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		data, err := s.fleet.fetchImage(ctx, op.image)
		cancel()
		if err != nil {
			s.fleet.log.Warn("Boot image fetch failed; the server boots into nothing", "server", s.Name, "image", op.image, "error", err)
			return
		}
		if !s.current(op.gen) {
			return
		}
		iso = data
	}
	if s.agentRunning {
		r.Stop(s.id)
		s.agentRunning = false
	}
	if err := r.Boot(s, iso); err != nil {
		s.fleet.log.Warn("Agent did not start", "server", s.Name, "device", op.dev, "error", err)
		return
	}
	s.agentRunning, s.agentGen = true, op.gen
}

// current reports whether the server is still on in power cycle gen.
func (s *Server) current(gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen == gen && s.st.Power == PowerOn
}

// resume restarts the agent of a server that was running one when bmcsim last stopped: the host
// kept running while its BMC restarted.
func (s *Server) resume() {
	s.mu.Lock()
	if s.st.Power != PowerOn || !runsAgent(s.st.Booted) {
		s.mu.Unlock()
		return
	}
	s.gen++
	op := runOp{gen: s.gen, dev: s.st.Booted, image: s.st.BootedImage}
	s.mu.Unlock()
	s.enqueue(op)
}

// PowerState returns the current power state.
func (s *Server) PowerState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Power
}
