package main

import (
	"testing"
	"time"
)

func testOptions(seed uint64) options {
	return options{n: 100, seed: seed, killMin: 20 * time.Second, killMax: 60 * time.Second,
		passwordDelay: time.Minute, redfishErrors: 0.05, redfishTimeouts: 0.05}
}

// TestScheduleReplays: the same seed gives the same schedule (the campaign's promise), another seed
// another one.
func TestScheduleReplays(t *testing.T) {
	a, b, other := newSchedule(testOptions(7)), newSchedule(testOptions(7)), newSchedule(testOptions(8))
	// b draws its kills in another order (one at a time, after the description): the kills must
	// not depend on when they are drawn.
	for i := range 20 {
		b.kill(i)
	}
	if da, db := a.describe(hostName), b.describe(hostName); da != db {
		t.Errorf("seed 7 twice gave\n%s\nand\n%s", da, db)
	}
	for i := range 50 {
		if a.kill(i) != b.kill(i) {
			t.Fatalf("kill %d differs for the same seed: %+v and %+v", i, a.kill(i), b.kill(i))
		}
	}
	if a.describe(hostName) == other.describe(hostName) {
		t.Errorf("seeds 7 and 8 gave the same schedule:\n%s", a.describe(hostName))
	}
}

// TestScheduleBounds: every drawn value is where the campaign says it is, for many seeds.
func TestScheduleBounds(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		o := testOptions(seed)
		s := newSchedule(o)
		for i := range 30 {
			k := s.kill(i)
			if k.after < o.killMin || k.after > o.killMax || k.down < 0 || k.down >= 5*time.Second {
				t.Fatalf("seed %d kill %d: %+v, want after in [%s, %s] and down in [0, 5s)", seed, i, k, o.killMin, o.killMax)
			}
		}
		if s.ironicKill.step != stepProvisioned && s.ironicKill.step != stepDeprovisioned && s.ironicKill.step != stepProvisionedB {
			t.Errorf("seed %d: Ironic killed in step %d, want a step where hosts deploy or clean", seed, s.ironicKill.step)
		}
		if s.serviceKill.step != stepServiced || s.serviceKill.after < 5*time.Second || s.serviceKill.after > 40*time.Second ||
			s.serviceDown < 2*time.Second || s.serviceDown > 10*time.Second {
			t.Errorf("seed %d: Ironic killed %s, down %s, want while hosts are serviced", seed, s.serviceKill, s.serviceDown)
		}
		if s.crashStep != stepProvisioned && s.crashStep != stepProvisionedB {
			t.Errorf("seed %d: agent crash in step %d, want a provisioning step", seed, s.crashStep)
		}
		if s.apiRestart.step == stepAdopted || s.apiRestart.step == stepServiced || s.password.step == stepAdopted || s.password.step == stepServiced || s.password.step == stepDeleted {
			t.Errorf("seed %d: API restart in step %d, password change in step %d", seed, s.apiRestart.step, s.password.step)
		}
		if s.crashHost == s.passwordHost || s.crashHost < 0 || s.crashHost >= o.n || s.passwordHost < 0 || s.passwordHost >= o.n {
			t.Errorf("seed %d: crash host %d, password host %d: want two different hosts of %d", seed, s.crashHost, s.passwordHost, o.n)
		}
		if s.wipeAfter < 5*time.Second || s.wipeAfter > 30*time.Second {
			t.Errorf("seed %d: wipe after %s", seed, s.wipeAfter)
		}
	}
}
