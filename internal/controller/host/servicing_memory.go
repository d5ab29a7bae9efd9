package host

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// finishedServicings remembers, per host, the live update the provisioner finished, by the time
// it started (the Ready condition's move to Servicing, which the status keeps): until the status
// write that ends it succeeds, the host still reads servicing, and the next reconcile must end it
// rather than ask the provisioner again with a request that has changed meanwhile. Memory only,
// like the retry times: after an operator restart in that moment the request is asked again.
type finishedServicings struct {
	m sync.Map // types.UID → time.Time
}

func (f *finishedServicings) record(uid types.UID, since time.Time) {
	if f != nil && !since.IsZero() {
		f.m.Store(uid, since)
	}
}

// has reports whether the live update that started at since is the one recorded finished (a
// live update restarted after a failure has no start time and is never taken for it).
func (f *finishedServicings) has(uid types.UID, since time.Time) bool {
	if f == nil || since.IsZero() {
		return false
	}
	v, ok := f.m.Load(uid)
	return ok && v.(time.Time).Equal(since)
}

func (f *finishedServicings) forget(uid types.UID) {
	if f != nil {
		f.m.Delete(uid)
	}
}
