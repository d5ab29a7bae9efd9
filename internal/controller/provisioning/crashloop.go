package provisioning

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// crashRestarts is how many restarts make a crash loop. Kubernetes backs off after the first; a
	// container that stopped once or twice because a neighbour was not listening yet is not a loop.
	crashRestarts = 3
	// shortRun: a run that ended sooner after it started was a crash of a container that cannot
	// keep running. One that ran longer (an out-of-memory kill after weeks, the baremetal-operator
	// exiting when it loses its lease during an API server rollout) is not a loop, however many
	// restarts the pod has had in its life.
	shortRun = 10 * time.Minute
	// crashWindow is how long after such a crash the container counts as crash-looping: longer
	// than Kubernetes' longest back-off (5 minutes) plus a short run, so that a loop stays
	// reported from one crash to the next instead of turning Available in between.
	crashWindow = 5*time.Minute + shortRun
)

// crashLoop says which container of the Deployment d's pods crash-loops ("" when none does): one
// (init containers included) that restarted at least crashRestarts times, whose last run ended
// less than shortRun after it started, less than crashWindow before now. Kubernetes' own state
// (CrashLoopBackOff) shows only between a crash and the next start; a container that passes its
// readiness probe and then crashes (the baremetal-operator panicking on one host a minute after it
// starts) makes the Deployment Available again at each start, which resets down's clock, so down
// alone never reports it. Pods that are going away do not count (a rollout replaces them).
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
			last := cs.LastTerminationState.Terminated
			if cs.RestartCount < crashRestarts || last == nil || last.FinishedAt.IsZero() {
				continue
			}
			// A run whose start is not known (the container could not start) was short.
			short := last.StartedAt.IsZero() || last.FinishedAt.Sub(last.StartedAt.Time) < shortRun
			if short && now.Before(last.FinishedAt.Add(crashWindow)) {
				return fmt.Sprintf("container %s of pod %s restarted %d times", cs.Name, pod.Name, cs.RestartCount)
			}
		}
	}
	return ""
}
