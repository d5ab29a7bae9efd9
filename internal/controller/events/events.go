// Package events collects the Kubernetes Events of one reconcile and emits them after the writes
// that record what they announce, so that an Event never tells of something the object's status
// does not show (a failed write is retried, and its Events with it). Reasons are CamelCase
// constants of the emitting controller; the note carries the detail and is cleaned once more on the way
// out (statustext), but text carrying a known secret (a BMC password) must be sanitized by the
// controller that knows the secret.
package events

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/metalforge/metalforge/internal/statustext"
)

// Event is one Kubernetes Event (events.k8s.io/v1 fields).
type Event struct {
	Type, Reason, Action, Note string
	// Related is the secondary object the event is about (nil: none). client-go merges events of
	// the same object, type, reason, action and related object into one series that keeps the
	// first note, so events about different objects must name them here to stay apart.
	Related runtime.Object
}

// List is the Events a reconcile decided on, in order.
type List []Event

// Normal queues a Normal event.
func (l *List) Normal(reason, action, note string) {
	*l = append(*l, Event{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Note: note})
}

// Warning queues a Warning event.
func (l *List) Warning(reason, action, note string) {
	*l = append(*l, Event{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Note: note})
}

// NormalAbout queues a Normal event about a related object.
func (l *List) NormalAbout(related runtime.Object, reason, action, note string) {
	*l = append(*l, Event{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Note: note, Related: related})
}

// Emit sends the events about obj through rec, in order. Every note goes through
// statustext.Clean on the way (credentials in URLs removed, one line, at most the API server's
// 1024 bytes: a longer note is refused and the Event lost). The note is passed as an argument,
// never as the format, so a "%" in it stays as it is.
func (l List) Emit(rec recorder.EventRecorder, obj runtime.Object) {
	for _, e := range l {
		rec.Eventf(obj, e.Related, e.Type, e.Reason, e.Action, "%s", statustext.Clean(e.Note, statustext.EventNoteLimit))
	}
}
