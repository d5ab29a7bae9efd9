// Package predicates holds the watch filters several controllers use alike.
package predicates

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// DeletionMarked passes an update that marks the object for deletion (or, with a restore,
// unmarks it). Or-ed with predicate.GenerationChangedPredicate: a deletion does not change the
// generation of an object whose finalizer holds it, so that filter alone would miss it until the
// next poll.
func DeletionMarked() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp())
	}}
}

// SecretDataChanged passes Secrets that appear, go, or change content; not label and finalizer
// changes (the operators' own, which label the Secrets they cache).
func SecretDataChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*corev1.Secret)
		n, okN := e.ObjectNew.(*corev1.Secret)
		return !okO || !okN || !reflect.DeepEqual(o.Data, n.Data) || !reflect.DeepEqual(o.StringData, n.StringData) ||
			!n.DeletionTimestamp.Equal(o.DeletionTimestamp)
	}}
}
