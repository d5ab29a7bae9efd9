package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// reachesTheNode says why a container needs the privileged SCC ("" when it does not): the host's
// network, a host path, or an added capability.
func reachesTheNode(pod corev1.PodSpec, c corev1.Container) string {
	if pod.HostNetwork {
		return "host network"
	}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i >= 0 && pod.Volumes[i].HostPath != nil {
			return "host path " + pod.Volumes[i].HostPath.Path
		}
	}
	if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
		return fmt.Sprint("capabilities ", sc.Capabilities.Add)
	}
	return ""
}

// TestPrivilegedWhereTheNodeIsReached: OpenShift admits a container on the host's network, with a
// host path or an added capability only under the privileged SCC, which it applies to privileged
// containers; every such container of every mode's stack is privileged (the whole metal3 and
// image-customization-controller pods are, as OpenShift's), the baremetal-operator is not.
func TestPrivilegedWhereTheNodeIsReached(t *testing.T) {
	for name, spec := range map[string]metal3.ProvisioningSpec{
		"managed":  managed,
		"disabled": {ProvisioningNetwork: metal3.ProvisioningNetworkDisabled},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(spec)
			in.Images.ImageCustomizationController, in.Images.IronicAgent = "quay.io/mf/icc:1", "quay.io/mf/agent:1"
			in.IronicHostIPs = []string{"192.168.111.10"}
			s := Render(in)
			if s.ICC == nil {
				t.Fatal("no image-customization-controller")
			}
			var reaching []string
			for _, d := range s.Deployments() {
				pod := d.Spec.Template.Spec
				for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
					why := reachesTheNode(pod, c)
					isPrivileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
					switch {
					case why != "" && !isPrivileged:
						t.Errorf("%s/%s (%s) is not privileged", d.Name, c.Name, why)
					case d.Name == BMODeployment && isPrivileged:
						t.Errorf("%s/%s is privileged: it only talks to Ironic and the API server", d.Name, c.Name)
					}
					if why != "" {
						reaching = append(reaching, d.Name+"/"+c.Name)
					}
				}
			}
			if !slices.Contains(reaching, "metal3/metal3-ironic") || !slices.Contains(reaching, ICCDeployment+"/machine-image-customization-controller") {
				t.Errorf("containers that reach the node: %s", strings.Join(reaching, ", "))
			}
		})
	}
}

// TestMetal3PodHasNoToken: no container of the metal3 pod calls the Kubernetes API, so the
// account's token (it reads every Secret) stays out of that host-network pod.
func TestMetal3PodHasNoToken(t *testing.T) {
	pod := Render(input(managed)).Metal3.Spec.Template.Spec
	if a := pod.AutomountServiceAccountToken; a == nil || *a {
		t.Fatalf("automountServiceAccountToken %v", a)
	}
}

// TestDnsmasqSharesTheTFTPRoot: dnsmasq's TFTP root (/shared/tftpboot) is on the volume it
// shares with Ironic, so the loaders and Ironic's PXE files are the ones it serves.
func TestDnsmasqSharesTheTFTPRoot(t *testing.T) {
	d := Render(input(managed)).Metal3
	dnsmasq, ironic := container(t, d, "metal3-dnsmasq"), container(t, d, "metal3-ironic")
	mount := func(c *corev1.Container) string {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix("/shared/tftpboot", m.MountPath+"/") {
				return m.Name
			}
		}
		return ""
	}
	if got := mount(dnsmasq); got == "" || got != mount(ironic) {
		t.Fatalf("dnsmasq's /shared/tftpboot is on volume %q, Ironic's on %q", got, mount(ironic))
	}
}

// TestBMOLeaderElection: the baremetal-operator keeps its lease through an API server outage of
// OpenShift's length, as the operator does.
func TestBMOLeaderElection(t *testing.T) {
	args := container(t, Render(input(managed)).BMO, "metal3-baremetal-operator").Args
	for _, want := range []string{"--leader-elect", "--leader-elect-lease-duration=2m17s", "--leader-elect-renew-deadline=1m47s", "--leader-elect-retry-period=26s"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
}
