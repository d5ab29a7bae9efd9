// Package apicount counts the API write requests a client makes, by "resource verb" (with the
// subresource: "hostfirmwaresettings/status patch"), for tests that hold a controller to a write
// budget. Wrap a copy of the test's rest.Config with Writes.Wrap and give it to the manager.
package apicount

import (
	"maps"
	"net/http"
	"sync"

	"github.com/metalforge/metalforge/internal/apimetrics"
)

// Writes counts write requests. The zero value is ready to use; safe for concurrent use.
type Writes struct {
	mu     sync.Mutex
	counts map[string]int
}

// Wrap is for rest.Config.Wrap: it is called once per transport the client makes.
func (w *Writes) Wrap(rt http.RoundTripper) http.RoundTripper { return transport{w, rt} }

// Count is how many writes were counted under key ("firmwareschemas create").
func (w *Writes) Count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[key]
}

// All returns a copy of every count.
func (w *Writes) All() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts)
}

type transport struct {
	w    *Writes
	next http.RoundTripper
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resource, sub := apimetrics.Resource(req.URL.Path)
	if verb := apimetrics.Verb(req.Method, false, false); apimetrics.IsWrite(verb) {
		if sub != "" {
			resource += "/" + sub
		}
		t.w.mu.Lock()
		if t.w.counts == nil {
			t.w.counts = map[string]int{}
		}
		t.w.counts[resource+" "+verb]++
		t.w.mu.Unlock()
	}
	return t.next.RoundTrip(req)
}
