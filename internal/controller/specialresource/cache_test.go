package specialresource

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestCompactPod: the cached pod keeps what the controller reads (annotations, node, container
// names, phase, Ready, reason and message) and drops the rest of spec and status.
func TestCompactPod(t *testing.T) {
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "driver-x", Annotations: map[string]string{sro.HashAnnotation: "h1", "kubectl.kubernetes.io/restartedAt": "now"},
			Labels: map[string]string{sro.OwnedLabel: "sr"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "driver", Image: "registry/driver:5.14",
			Env: []corev1.EnvVar{{Name: "KERNEL", Value: "5.14"}}, Args: []string{"load"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "Evicted", Message: "low on memory",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "driver", Image: "registry/driver:5.14", RestartCount: 2}}},
	}
	obj, err := compactPod(full)
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*corev1.Pod)
	if p.Annotations[sro.HashAnnotation] != "h1" || p.Labels[sro.OwnedLabel] != "sr" || p.Spec.NodeName != "n1" ||
		len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Name != "driver" || p.Status.Phase != corev1.PodRunning ||
		p.Status.Reason != "Evicted" || p.Status.Message != "low on memory" {
		t.Fatalf("kept %+v", p)
	}
	if p.Spec.Containers[0].Image != "" || p.Spec.Containers[0].Env != nil || p.Status.ContainerStatuses != nil || len(p.Annotations) != 1 {
		t.Errorf("kept more than it reads: %+v", p)
	}
	if !podAvailable(p) {
		t.Error("the compact pod of a Ready pod is not available")
	}
	if other, _ := compactPod("not a pod"); other != "not a pod" {
		t.Errorf("another object changed: %v", other)
	}
}
