package host

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// finishedServicings remembers, per host, the live update the provisioner finished and what it
// applied, by the time it started (the Ready condition's move to Servicing, which the status
// keeps): until the status write that ends it succeeds, the host still reads servicing, and the
// next reconcile ends it without asking the provisioner again. Memory only, a shortcut: after an
// operator restart in that moment the provisioner answers the same from its own record of the run.
type finishedServicings struct {
	m sync.Map // types.UID → finishedServicing
}

type finishedServicing struct {
	since   time.Time
	applied provisioner.Serviced
	// ended is the event that announces the end when it is not a completion (an abort after
	// steps that applied something): the reconcile that ends it after a failed status write
	// announces the same end.
	ended *events.Event
}

func (f *finishedServicings) record(uid types.UID, since time.Time, applied provisioner.Serviced, ended *events.Event) {
	if f != nil && !since.IsZero() {
		f.m.Store(uid, finishedServicing{since: since, applied: applied, ended: ended})
	}
}

// has returns the live update that started at since, if it is the one recorded finished.
func (f *finishedServicings) has(uid types.UID, since time.Time) (finishedServicing, bool) {
	if f == nil || since.IsZero() {
		return finishedServicing{}, false
	}
	v, ok := f.m.Load(uid)
	if !ok || !v.(finishedServicing).since.Equal(since) {
		return finishedServicing{}, false
	}
	return v.(finishedServicing), true
}

func (f *finishedServicings) forget(uid types.UID) {
	if f != nil {
		f.m.Delete(uid)
	}
}
