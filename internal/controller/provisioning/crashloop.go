package provisioning

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// crashRestarts is how many restarts make a crash loop. Kubernetes backs off after the first; a
// container that stopped once or twice because a neighbour was not listening yet is not a loop.
const crashRestarts = 3

// crashLoop says which container of the Deployment d's pods crash-loops ("" when none does): one
// (init containers included) that restarted at least crashRestarts times and either waits in
// Kubernetes' CrashLoopBackOff or last stopped less than unavailableLimit before now. The second
// case matters for a container that passes its readiness probe and then crashes (the
// baremetal-operator panicking on one host a minute after it starts): each short run makes the
// Deployment Available again, which resets down's clock, so down alone never reports it. Pods that
// are going away do not count (a rollout replaces them).
func crashLoop(d *appsv1.Deployment, pods []corev1.Pod, now time.Time) string {
	if d == nil || d.Spec.Selector == nil {
		return ""
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || selector.Empty() {
		return ""
	}
	for i := range pods {
		pod := &pods[i]
		if pod.Namespace != d.Namespace || pod.DeletionTimestamp != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			if cs.RestartCount < crashRestarts {
				continue
			}
			backingOff := cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
			recent := false
			if t := cs.LastTerminationState.Terminated; t != nil && !t.FinishedAt.IsZero() {
				recent = now.Before(t.FinishedAt.Add(unavailableLimit))
			}
			if backingOff || recent {
				return fmt.Sprintf("container %s of pod %s restarted %d times", cs.Name, pod.Name, cs.RestartCount)
			}
		}
	}
	return ""
}
