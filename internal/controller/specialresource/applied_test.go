package specialresource

import "github.com/metalforge/metalforge/internal/controller/patch"

// size is how many objects the tracker remembers, over every kind.
func (a *appliedTracker) size() int {
	a.mu.Lock()
	kinds := make([]*patch.Tracker, 0, len(a.kinds))
	for _, t := range a.kinds {
		kinds = append(kinds, t)
	}
	a.mu.Unlock()
	n := 0
	for _, t := range kinds {
		n += t.Len()
	}
	return n
}
