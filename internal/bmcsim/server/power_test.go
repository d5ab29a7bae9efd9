package server

import (
	"slices"
	"sync"
	"testing"

	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// recordingRunner records the agent starts and stops a server asks for.
type recordingRunner struct {
	mu     sync.Mutex
	events []string
}

func (r *recordingRunner) Boot(agent.Machine, []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "boot")
	return nil
}

func (r *recordingRunner) Stop(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "stop")
}

func (r *recordingRunner) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// TestLateStopSparesANewerAgent: the agent powers its server off (PowerOff, from its own
// goroutine) while Ironic powers it on again; the power-off's stop step can reach the queue after
// the newer boot's start step, and must not stop the agent that boot started.
func TestLateStopSparesANewerAgent(t *testing.T) {
	cfg := config.Default()
	cfg.Hosts = 1
	cfg.BootTime = config.Duration{}
	runner := &recordingRunner{}
	f, err := New(cfg, Options{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	s := f.Servers[0]
	s.update(func(st *State) bool { // every boot starts an agent
		st.Boot.Target, st.Boot.Enabled = TargetPxe, BootContinuous
		return true
	})
	if err := s.Reset(ResetOn); err != nil {
		t.Fatal(err)
	}
	f.Quiesce()
	if got := runner.take(); !slices.Equal(got, []string{"boot"}) {
		t.Fatalf("first power-on: runner events %v, want [boot]", got)
	}

	// PowerOff as the agent calls it, its stop step held back until after the next power-on.
	s.mu.Lock()
	lateStop := s.powerOffLocked()
	s.mu.Unlock()
	if err := s.Reset(ResetOn); err != nil {
		t.Fatal(err)
	}
	f.Quiesce()
	if got := runner.take(); !slices.Equal(got, []string{"stop", "boot"}) {
		t.Fatalf("power-on after the power-off: runner events %v, want [stop boot]", got)
	}
	s.enqueue(lateStop)
	f.Quiesce()
	if got := runner.take(); len(got) != 0 {
		t.Errorf("the late stop step: runner events %v, want none (the newer agent keeps running)", got)
	}

	// A stop step of a power-off after that boot still stops the agent.
	s.PowerOff()
	f.Quiesce()
	if got := runner.take(); !slices.Equal(got, []string{"stop"}) {
		t.Errorf("a later power-off: runner events %v, want [stop]", got)
	}
}

// TestNoDiskWriteWhileOff: an agent that finishes writing the disk after its server was switched
// off (its stop still on the run queue) or factory reset leaves the disk as it is.
func TestNoDiskWriteWhileOff(t *testing.T) {
	cfg := config.Default()
	cfg.Hosts = 1
	f, err := New(cfg, Options{Runner: &recordingRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	s := f.Servers[0]
	if err := s.Reset(ResetOn); err != nil {
		t.Fatal(err)
	}
	s.WriteDisk("http://images/a.qcow2")
	s.FactoryReset()
	s.WriteDisk("http://images/b.qcow2")
	if st := s.Snapshot(); st.DiskImage != "" || st.DiskWrites != 1 {
		t.Errorf("after a write while off: disk %q, %d writes; want blank, 1", st.DiskImage, st.DiskWrites)
	}
}
