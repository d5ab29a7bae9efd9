package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCovers(t *testing.T) {
	desired := corev1.PodSpec{
		HostNetwork: true,
		Containers: []corev1.Container{{Name: "a", Image: "i", Env: []corev1.EnvVar{{Name: "X", Value: "1"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}},
		NodeSelector: map[string]string{"role": "master"},
	}
	defaulted := func() corev1.PodSpec {
		s := *desired.DeepCopy()
		s.DNSPolicy, s.SchedulerName, s.RestartPolicy = corev1.DNSClusterFirst, "default-scheduler", corev1.RestartPolicyAlways
		s.Containers[0].TerminationMessagePath, s.Containers[0].ImagePullPolicy = "/dev/termination-log", corev1.PullIfNotPresent
		s.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.05")
		s.NodeSelector["zone"] = "a"
		return s
	}
	for name, tc := range map[string]struct {
		existing func(corev1.PodSpec) corev1.PodSpec
		want     bool
	}{
		"identical":               {func(s corev1.PodSpec) corev1.PodSpec { return s }, true},
		"defaulted by the server": {func(corev1.PodSpec) corev1.PodSpec { return defaulted() }, true},
		"another image":           {func(s corev1.PodSpec) corev1.PodSpec { s.Containers[0].Image = "j"; return s }, false},
		"another env value":       {func(s corev1.PodSpec) corev1.PodSpec { s.Containers[0].Env[0].Value = "2"; return s }, false},
		"an env var more": {func(s corev1.PodSpec) corev1.PodSpec {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "Y"})
			return s
		}, false},
		"a container more": {func(s corev1.PodSpec) corev1.PodSpec {
			s.Containers = append(s.Containers, corev1.Container{Name: "b"})
			return s
		}, false},
		"no host network":               {func(s corev1.PodSpec) corev1.PodSpec { s.HostNetwork = false; return s }, false},
		"node selector value changed":   {func(s corev1.PodSpec) corev1.PodSpec { s.NodeSelector = map[string]string{"role": "worker"}; return s }, false},
		"same quantity, other notation": {func(s corev1.PodSpec) corev1.PodSpec { return defaulted() }, true},
		"another quantity": {func(s corev1.PodSpec) corev1.PodSpec {
			s.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			return s
		}, false},
		"a field desired leaves unset is set": {func(s corev1.PodSpec) corev1.PodSpec { s.PriorityClassName = "x"; return s }, true},
	} {
		t.Run(name, func(t *testing.T) {
			d := *desired.DeepCopy()
			e := tc.existing(*desired.DeepCopy())
			if got := covers(&d, &e); got != tc.want {
				t.Fatalf("covers = %v, want %v", got, tc.want)
			}
		})
	}
}
