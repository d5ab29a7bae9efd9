package companion

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/events"
)

// OwnedByHost reports whether obj carries an owner reference to a BareMetalHost: a companion the
// controllers created, which the garbage collector deletes with its host. A companion without one
// was created by a user, and nothing else ever tells them when its name matches no host.
func OwnedByHost(obj client.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "BareMetalHost" && ref.APIVersion == metal3.GroupVersion.String() {
			return true
		}
	}
	return false
}

// ReasonNoHost is the Event reason for a companion whose name matches no host.
const ReasonNoHost = "HostNotFound"

// NoHostMessage says that obj, of kind, names no host: the message of NoHost's condition and
// Warning, and of the host controller's Warning for a HostUpdatePolicy.
func NoHostMessage(kind string, obj client.Object) string {
	return fmt.Sprintf("metadata.name: no BareMetalHost named %q in namespace %q; a %s applies to the host of the same name",
		obj.GetName(), obj.GetNamespace(), kind)
}

// NoHost is how a controller marks its companion when no BareMetalHost of that name exists in its
// namespace (a typo, or the host not created yet): validType is the kind's Valid condition, set
// False with reason and a message naming metadata.name, since the spec cannot take effect. It
// returns a Warning when that condition is new or its message changed, so that a periodic look
// at the same companion emits nothing. Once the host exists, Unmark takes the condition back; once
// it registers, the controller's first reading judges the spec and sets it anew.
func NoHost(conds *[]metav1.Condition, kind, validType, reason string, obj client.Object, now time.Time) events.List {
	msg := NoHostMessage(kind, obj)
	prev := conditions.Get(*conds, validType)
	var list events.List
	if prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != msg {
		list.Warning(ReasonNoHost, "Validate", msg)
	}
	conditions.Set(conds, conditions.False(validType, reason, msg), obj.GetGeneration(), now)
	return list
}

// Unmark removes the condition NoHost set on obj (validType False with NoHost's message) and
// reports whether there was one: the host exists now, even if it is not registered yet. Valid is
// left absent (not judged) rather than given a reason metal3 does not define, until the first
// reading of the host judges the spec.
func Unmark(conds *[]metav1.Condition, kind, validType string, obj client.Object) bool {
	c := conditions.Get(*conds, validType)
	if c == nil || c.Status != metav1.ConditionFalse || c.Message != NoHostMessage(kind, obj) {
		return false
	}
	return conditions.Remove(conds, validType)
}
