// Package conditions sets metav1.Conditions the way every controller of the project does: the
// generation the condition was computed from is stamped on it, and its transition time moves only
// when its status or reason changes, so the time tells since when the object is in its current
// situation (apimachinery's meta.SetStatusCondition moves it on status changes only, which hides a
// change of reason such as Provisioning → Deprovisioning). Times are truncated to seconds, as the
// API server stores them, so that an unchanged condition compares equal after a round trip.
package conditions

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set puts c (type, status, reason, message) into conds, stamping generation and, when the status
// or reason changed or the condition is new, now as its transition time. It reports whether
// anything changed.
func Set(conds *[]metav1.Condition, c metav1.Condition, generation int64, now time.Time) bool {
	at := metav1.NewTime(now.Truncate(time.Second))
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		changed := old.Status != c.Status || old.Reason != c.Reason
		if changed {
			old.LastTransitionTime = at
		}
		changed = changed || old.Message != c.Message || old.ObservedGeneration != generation
		old.Status, old.Reason, old.Message, old.ObservedGeneration = c.Status, c.Reason, c.Message, generation
		return changed
	}
	c.ObservedGeneration, c.LastTransitionTime = generation, at
	*conds = append(*conds, c)
	return true
}

// Get returns the condition of type t, or nil.
func Get(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// IsTrue reports whether the condition of type t exists and is True.
func IsTrue(conds []metav1.Condition, t string) bool {
	c := Get(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// IsCurrent reports whether the condition of type t is True and was computed from the given
// generation (a Ready condition from before the last spec change does not count).
func IsCurrent(conds []metav1.Condition, t string, generation int64) bool {
	c := Get(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

// Remove deletes the condition of type t; it reports whether there was one.
func Remove(conds *[]metav1.Condition, t string) bool {
	for i := range *conds {
		if (*conds)[i].Type == t {
			*conds = append((*conds)[:i], (*conds)[i+1:]...)
			return true
		}
	}
	return false
}

// True, False and Unknown build a condition of type t.
func True(t, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: message}
}

// False builds a False condition of type t.
func False(t, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: message}
}

// Unknown builds an Unknown condition of type t.
func Unknown(t, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: reason, Message: message}
}
