package render

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestICCRegistriesConf: the controller is given the node's registries.conf, as OpenShift's
// operator gives it (REGISTRIES_CONF_PATH): a disconnected cluster's mirrors, written by the
// machine-config operator on the node, reach every host's image. The node's containers
// directory is mounted read-only (nothing the controller does may change the node's
// configuration).
func TestICCRegistriesConf(t *testing.T) {
	d, _, _ := iccObjects(Render(iccInput(managed, "192.168.111.10")))
	c := container(t, d, "machine-image-customization-controller")
	path := env(c)["REGISTRIES_CONF_PATH"]
	if path != "/etc/containers/registries.conf" {
		t.Fatalf("REGISTRIES_CONF_PATH %q, want /etc/containers/registries.conf", path)
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/containers" })
	if i < 0 || !c.VolumeMounts[i].ReadOnly {
		t.Fatalf("mounts %+v: want the node's /etc/containers read-only", c.VolumeMounts)
	}
	pod := d.Spec.Template.Spec
	j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if j < 0 || pod.Volumes[j].HostPath == nil || pod.Volumes[j].HostPath.Path != "/etc/containers" {
		t.Errorf("volume of /etc/containers %+v: want the node's /etc/containers", pod.Volumes)
	}
}
