package host

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// runningPreparations remembers, per host, the request a preparation started with, so that an
// edit of the host's firmware objects (or its RAID or root device hints) while the manual
// cleaning runs does not change the request: the provisioner compares the request with the one
// it started, and a different one makes it start a second cleaning once the first ends, flashing
// the firmware of the first again. The preparation that runs is recorded when it ends; what was
// added meanwhile takes the host through preparing once more (as a change made while it is
// available does), alone. Servicing keeps its request the same way (servicing.go).
//
// A preparation that ended stays, marked done, until a reconcile sees the host out of preparing:
// when the status write that ends it fails, the next reconcile ends it again from memory rather
// than start a second cleaning (finishedServicings does the same for live updates).
//
// Memory only: after an operator restart in the middle of a preparation the host asks with what
// it reads then, as before. An entry lasts while the host is preparing: any reconcile that sees
// the host in another state forgets it, so a later preparation never inherits it. When each
// host's last preparation ended is kept apart, for as long as the host exists (firmwareCutoff).
type runningPreparations struct {
	m     sync.Map // types.UID → preparation
	ended sync.Map // types.UID → time.Time
}

// preparation is what a preparation applies, and what the host records once it is done.
type preparation struct {
	data provisioner.PrepareData
	// raid and hints are the spec's when the preparation started, recorded in status at its end.
	raid  *metal3.RAIDConfig
	hints *metal3.RootDeviceHints
	// applied is what the preparations before this one applied since the host entered preparing
	// (changes made while one ran go next): firmware settings and updates.
	applied provisioner.PrepareData
	// done: the provisioner finished it; the host is moving on.
	done bool
}

func (r *runningPreparations) get(uid types.UID) (preparation, bool) {
	if r == nil {
		return preparation{}, false
	}
	v, ok := r.m.Load(uid)
	if !ok {
		return preparation{}, false
	}
	return v.(preparation), true
}

func (r *runningPreparations) put(uid types.UID, p preparation) {
	if r != nil {
		r.m.Store(uid, p)
	}
}

func (r *runningPreparations) forget(uid types.UID) {
	if r != nil {
		r.m.Delete(uid)
	}
}

// markEnded records when the host's preparation ended (the wall clock, not the API's seconds).
func (r *runningPreparations) markEnded(uid types.UID, at time.Time) {
	if r != nil {
		r.ended.Store(uid, at)
	}
}

// endedAt is when the host's last preparation ended, if this process saw it end.
func (r *runningPreparations) endedAt(uid types.UID) (time.Time, bool) {
	if r == nil {
		return time.Time{}, false
	}
	v, ok := r.ended.Load(uid)
	if !ok {
		return time.Time{}, false
	}
	return v.(time.Time), true
}

// forgetHost forgets everything about a host that is gone.
func (r *runningPreparations) forgetHost(uid types.UID) {
	if r != nil {
		r.m.Delete(uid)
		r.ended.Delete(uid)
	}
}
