package specialresource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// A change of spec.namespace moves the driver. What the operator created in the namespace it
// used before is removed as deletion removes it (removeOwned: the workloads first, everything
// else once their pods stopped, then the namespace if the operator created it; one the user
// created stays), and the recipe is applied in the new namespace only once those pods stopped: a
// driver pod unloads its modules when it stops, which would pull them from under a new pod that
// loaded them already (its readiness probe would fail, and nothing would load them again).
//
// The namespaces left are read from the cluster at every reconcile, never kept in memory, so an
// operator restart in the middle of a move finishes it: status.namespace keeps naming the old
// namespace until nothing of ours is left there (setStatus), and the namespaces the operator
// created are labelled with the owner value and controlled by the SpecialResource (newNamespace).

// oldNamespaces are the namespaces whose objects of sr's a move must still remove, for target
// (spec.namespace): the namespace status.namespace names, and those labelled as created for sr
// (created) that it controls and that are not being deleted (the namespace controller removes
// what is in those; one of ours is deleted only once the move emptied it), but one a move kept for
// the recipe ConfigMap in it (namespacesToDelete): once status.namespace moved on, it was emptied.
// Never the target, nor a namespace a rendered object names (rendered): a recipe may place objects
// in a fixed namespace, which is no namespace left behind.
func oldNamespaces(sr *sro.SpecialResource, target string, created []corev1.Namespace, rendered map[string]bool) []string {
	old := map[string]bool{}
	if sr.Status.Namespace != "" {
		old[sr.Status.Namespace] = true
	}
	recipes := recipeNamespaces(sr)
	for i := range created {
		ns := &created[i]
		if _, fromRecipe := ns.Annotations[sro.HashAnnotation]; fromRecipe {
			// A Namespace the recipe renders carries the same label and owner: the plan applies
			// and prunes it, and one rendered only with a kernel's image would be taken for a
			// namespace left behind while no image exists (its held driver deleted).
			continue
		}
		if owner := metav1.GetControllerOf(ns); owner != nil && owner.UID == sr.UID && ns.DeletionTimestamp.IsZero() && !recipes[ns.Name] {
			old[ns.Name] = true
		}
	}
	delete(old, target)
	for ns := range rendered {
		delete(old, ns)
	}
	return slices.Sorted(maps.Keys(old))
}

// renderedNamespaces are the namespaces the rendered objects are in, and the Namespaces they are.
func renderedNamespaces(states []recipe.RenderedState) map[string]bool {
	out := map[string]bool{}
	for _, st := range states {
		for _, o := range st.Objects {
			if ns := o.Obj.GetNamespace(); ns != "" {
				out[ns] = true
			}
			if o.Obj.GetKind() == "Namespace" && o.Obj.GroupVersionKind().Group == "" {
				out[o.Obj.GetName()] = true
			}
		}
	}
	return out
}

// findOldNamespaces sets s.in.oldNamespaces (the objects phase, before it lists our objects).
func (r *Reconciler) findOldNamespaces(s *scope) error {
	created, err := r.namespacesCreatedFor(s.ctx, s.sr)
	if err != nil {
		return err
	}
	s.in.oldNamespaces = oldNamespaces(s.sr, s.in.namespace, created, renderedNamespaces(s.in.rendered))
	s.in.oldNamespacesRead = true
	return nil
}

// moveOut is the move phase. It runs once the reconcile got this far in the new namespace (the
// namespace usable, the recipe read, the dependencies Ready): until then the driver in the old
// namespace keeps serving, held like any other (hold). While workloads of ours in the old
// namespaces are not deleted yet, or their pods have not stopped, it stops the reconcile: nothing
// is applied in the new namespace, write deletes the workloads (leaveOldNamespaces), and it
// looks again every WaitPoll (pods do not wake the controller).
func (r *Reconciler) moveOut(s *scope) (outcome, bool, error) {
	if len(s.in.oldNamespaces) == 0 {
		return outcome{}, false, nil
	}
	where := inNamespaces(s.in.oldNamespaces)
	workloads := 0
	for _, gvk := range workloadKinds {
		items, err := r.ownedIn(s.ctx, s.sr, gvk, where)
		if err != nil {
			return outcome{}, false, err
		}
		workloads += len(items)
	}
	if workloads > 0 {
		if out, stop, err := r.pullSecretForMove(s); stop || err != nil {
			return out, stop, err
		}
	}
	s.fx.leaveOld = true
	wait, lost, err := r.podsToStop(s.ctx, s.sr, where)
	if err != nil {
		return outcome{}, false, err
	}
	if workloads == 0 && len(wait) == 0 {
		return outcome{}, false, nil
	}
	old := strings.Join(s.in.oldNamespaces, ", ")
	msg := fmt.Sprintf("moving to namespace %s: removing the workloads in %s first", s.in.namespace, old)
	if len(wait) > 0 {
		msg = fmt.Sprintf("moving to namespace %s: waiting for %d driver pods in %s to stop first", s.in.namespace, len(wait), old)
	}
	if len(lost) > 0 {
		msg += "; " + notWaitedFor(lost)
	}
	return progressing(sro.ReasonHandlingState, message.Sanitize(msg), "", r.Config.WaitPoll), true, nil
}

// pullSecretForMove: a move needs the pull Secret in the new namespace before it removes the
// driver in the old one. Without it the new driver's pods could not pull their image and would
// wait in ImagePullBackOff with no driver loaded anywhere; and an image the registry showed before
// is not looked up again (images), so nothing else would notice. The move waits, Errored naming
// the field, while the old driver serves (hold); a namespace the operator creates is created
// first, so that the Secret can be put there. Checked only while old workloads remain: once they
// are deleted, the move goes on whatever happens to the Secret (images reports it when a lookup
// needs it).
func (r *Reconciler) pullSecretForMove(s *scope) (outcome, bool, error) {
	if !image.Used(s.sr.Spec.DriverContainer) {
		return outcome{}, false, nil
	}
	_, problem, err := r.pullSecret(s)
	if err != nil || problem == "" {
		return outcome{}, false, err
	}
	msg := fmt.Sprintf("%s (moving from namespace %s: the driver there keeps running until this is fixed)", problem, strings.Join(s.in.oldNamespaces, ", "))
	return errored(sro.ReasonInvalidSpec, message.Sanitize(msg), r.Config.RetryDelay), true, nil
}

// leaveOldNamespaces is the move's write (write.go, last): one step of removeOwned over the old
// namespaces and, once nothing of ours is left in them, the deletion of those the operator
// created. Then the move is done (movedOut): status.namespace names the new namespace, and a
// NamespaceChanged event says what was removed.
func (r *Reconciler) leaveOldNamespaces(ctx context.Context, s *scope) error {
	if !s.fx.leaveOld {
		return nil
	}
	wait, lost, err := r.removeOwned(ctx, s.sr, inNamespaces(s.in.oldNamespaces))
	if err != nil || len(wait) > 0 {
		return err
	}
	deleted, err := r.deleteNamespaces(ctx, s.sr, namespacesToDelete(s.sr, s.in.oldNamespaces))
	if err != nil {
		return err
	}
	s.fx.movedOut = true
	if len(lost) > 0 {
		s.fx.events.Warning(reasonPodsNotWaitedFor, "Move", notWaitedFor(lost))
	}
	// Announced once: when status.namespace moves on, or when a namespace of ours left behind
	// (by an operator without moves) is deleted; not for a namespace being emptied again.
	if s.sr.Status.Namespace == s.in.namespace && len(deleted) == 0 {
		return nil
	}
	note := fmt.Sprintf("Moved to namespace %s: removed what the operator created in %s", s.in.namespace, strings.Join(s.in.oldNamespaces, ", "))
	if len(deleted) > 0 {
		note += fmt.Sprintf(", and namespace %s, which it created", strings.Join(deleted, ", "))
	}
	s.fx.events.Normal(reasonNamespaceChanged, "Move", note)
	return nil
}

// namespacesToDelete are the old namespaces a move may delete (those of them the operator created:
// deleteNamespaces checks), but those the SpecialResource still reads a recipe ConfigMap from:
// deleting one would take its recipe with it. Such a namespace goes with the SpecialResource, as
// before.
func namespacesToDelete(sr *sro.SpecialResource, old []string) []string {
	recipes := recipeNamespaces(sr)
	return slices.DeleteFunc(slices.Clone(old), func(ns string) bool { return recipes[ns] })
}

// recipeNamespaces are the namespaces of the recipe ConfigMaps sr reads (spec.recipe.configMap,
// spec.dependsOn[].recipe.configMap).
func recipeNamespaces(sr *sro.SpecialResource) map[string]bool {
	out := map[string]bool{}
	if cm := sr.Spec.Recipe.ConfigMap; cm != nil {
		out[cm.Namespace] = true
	}
	for _, d := range sr.Spec.DependsOn {
		if d.Recipe != nil && d.Recipe.ConfigMap != nil {
			out[d.Recipe.ConfigMap.Namespace] = true
		}
	}
	return out
}
