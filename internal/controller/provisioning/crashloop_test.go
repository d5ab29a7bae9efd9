package provisioning

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
)

// crashingPod is a pod of the metal3 Deployment whose container restarted restarts times, its last
// run lasting ran and ending stopped before now, and that waits in waiting ("" running).
func crashingPod(now time.Time, restarts int32, stopped, ran time.Duration, waiting string) corev1.Pod {
	cs := corev1.ContainerStatus{Name: "metal3-ironic", RestartCount: restarts}
	if restarts > 0 {
		end := now.Add(-stopped)
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2,
			StartedAt: metav1.NewTime(end.Add(-ran)), FinishedAt: metav1.NewTime(end)}
	}
	if waiting != "" {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waiting}
	} else {
		cs.State.Running = &corev1.ContainerStateRunning{}
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "metal3-7d9f", Namespace: "ns",
		Labels: map[string]string{"k8s-app": "metal3", render.ComponentLabel: render.StateService}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
}

// TestCrashLoop: which pods make a Deployment crash-loop.
func TestCrashLoop(t *testing.T) {
	now := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "metal3", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "metal3"}}}}
	for name, tc := range map[string]struct {
		pod  func() corev1.Pod
		want string // part of the answer ("" none)
	}{
		"backing off after 3 restarts": {
			pod:  func() corev1.Pod { return crashingPod(now, 3, 10*time.Second, 30*time.Second, "CrashLoopBackOff") },
			want: "container metal3-ironic of pod metal3-7d9f restarted 3 times",
		},
		"running again after the longest back-off, crashed a minute after its start": {
			pod:  func() corev1.Pod { return crashingPod(now, 7, 6*time.Minute, time.Minute, "") },
			want: "restarted 7 times",
		},
		"the window's end: longest back-off plus a short run": {
			pod:  func() corev1.Pod { return crashingPod(now, 7, crashWindow-time.Second, time.Minute, "") },
			want: "restarted 7 times",
		},
		"a container that could not start (no start time)": {
			pod: func() corev1.Pod {
				p := crashingPod(now, 4, time.Second, 0, "CrashLoopBackOff")
				p.Status.ContainerStatuses[0].LastTerminationState.Terminated.StartedAt = metav1.Time{}
				return p
			},
			want: "restarted 4 times",
		},
		"an init container backing off": {
			pod: func() corev1.Pod {
				p := crashingPod(now, 4, time.Second, time.Second, "CrashLoopBackOff")
				p.Status.InitContainerStatuses, p.Status.ContainerStatuses = p.Status.ContainerStatuses, nil
				p.Status.InitContainerStatuses[0].Name = "machine-os-images"
				return p
			},
			want: "container machine-os-images of pod",
		},
		"two restarts: not a loop yet": {
			pod: func() corev1.Pod { return crashingPod(now, 2, time.Second, time.Second, "CrashLoopBackOff") },
		},
		"one crash after weeks of running, in a pod with restarts in its past": {
			pod: func() corev1.Pod { return crashingPod(now, 4, 10*time.Second, 21*24*time.Hour, "CrashLoopBackOff") },
		},
		"running for longer than the window since its last crash": {
			pod: func() corev1.Pod { return crashingPod(now, 9, crashWindow+time.Second, time.Minute, "") },
		},
		"never restarted": {
			pod: func() corev1.Pod { return crashingPod(now, 0, 0, 0, "") },
		},
		"waiting for its image, its crashes long past": {
			pod: func() corev1.Pod { return crashingPod(now, 5, time.Hour, time.Minute, "ImagePullBackOff") },
		},
		"going away": {
			pod: func() corev1.Pod {
				p := crashingPod(now, 5, time.Second, time.Second, "CrashLoopBackOff")
				p.DeletionTimestamp = &metav1.Time{Time: now}
				return p
			},
		},
		"another Deployment's pod": {
			pod: func() corev1.Pod {
				p := crashingPod(now, 5, time.Second, time.Second, "CrashLoopBackOff")
				p.Labels = map[string]string{"k8s-app": "metal3-baremetal-operator"}
				return p
			},
		},
		"another namespace's pod": {
			pod: func() corev1.Pod {
				p := crashingPod(now, 5, time.Second, time.Second, "CrashLoopBackOff")
				p.Namespace = "other"
				return p
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := crashLoop(d, []corev1.Pod{tc.pod()}, now)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("crashLoop %q, want %q", got, tc.want)
			}
		})
	}
}
