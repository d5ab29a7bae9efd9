package host

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

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
}

func (f *finishedServicings) record(uid types.UID, since time.Time, applied provisioner.Serviced) {
	if f != nil && !since.IsZero() {
		f.m.Store(uid, finishedServicing{since: since, applied: applied})
	}
}

// has returns what the live update that started at since applied, if it is the one recorded
// finished.
func (f *finishedServicings) has(uid types.UID, since time.Time) (provisioner.Serviced, bool) {
	if f == nil || since.IsZero() {
		return provisioner.Serviced{}, false
	}
	v, ok := f.m.Load(uid)
	if !ok || !v.(finishedServicing).since.Equal(since) {
		return provisioner.Serviced{}, false
	}
	return v.(finishedServicing).applied, true
}

func (f *finishedServicings) forget(uid types.UID) {
	if f != nil {
		f.m.Delete(uid)
	}
}
