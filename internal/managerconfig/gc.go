package managerconfig

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector target of the operators when GOGC is not set.
const defaultGCPercent = 50

// LowerGCTarget sets the garbage collector's target to defaultGCPercent unless GOGC is set. Almost
// all of an operator's live heap is its informer cache, which lives as long as the process; the
// default target (twice the live heap) mostly holds garbage between collections. Half of that
// keeps the footprint down for a little more collector CPU (README, Performance: bench-hosts at
// N=5000 and bench-sro at N=1000 measured both). GOGC overrides it.
func LowerGCTarget() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}
