package render

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

var iccImages = func() Images {
	im := testImages
	im.ImageCustomizationController = "quay.io/mf/image-customization-controller:1"
	im.IronicAgent = "quay.io/mf/ironic-agent:1"
	return im
}()

func iccInput(spec metal3.ProvisioningSpec, hostIPs ...string) Input {
	in := input(spec)
	in.Images = iccImages
	in.IronicHostIPs = hostIPs
	return in
}

// iccObjects are the image-customization-controller's objects of a stack (nil when missing).
func iccObjects(s *Stack) (*appsv1.Deployment, *corev1.Service, *corev1.Secret) {
	var d *appsv1.Deployment
	var svc *corev1.Service
	var sec *corev1.Secret
	for _, o := range s.Objects {
		switch x := o.(type) {
		case *appsv1.Deployment:
			if x.Name == ICCDeployment {
				d = x
			}
		case *corev1.Service:
			if x.Name == ICCService {
				svc = x
			}
		case *corev1.Secret:
			if x.Name == ICCConfigSecret {
				sec = x
			}
		}
	}
	return d, svc, sec
}

// TestWithoutICC: without the image in the images file there is no image-customization-controller,
// its objects are listed as absent (to be removed), and the baremetal-operator hands out the
// machine OS images' agent.
func TestWithoutICC(t *testing.T) {
	s := Render(input(managed))
	if d, svc, sec := iccObjects(s); d != nil || svc != nil || sec != nil || s.ICC != nil {
		t.Fatal("image-customization-controller objects without its image")
	}
	var absent []string
	for _, o := range s.Absent {
		absent = append(absent, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
	if want := []string{"Deployment/" + ICCDeployment, "Service/" + ICCService, "Secret/" + ICCConfigSecret}; !slices.Equal(absent, want) {
		t.Errorf("absent %v, want %v", absent, want)
	}
	c := container(t, s.BMO, "metal3-baremetal-operator")
	if slices.Contains(c.Args, "--build-preprov-image") || env(c)["DEPLOY_RAMDISK_URL"] == "" {
		t.Errorf("baremetal-operator args %v, env %v", c.Args, env(c))
	}
	if len(s.Deployments()) != 2 {
		t.Errorf("deployments %d", len(s.Deployments()))
	}
}

// TestICC: the controller's Deployment, Service and config Secret for each way Ironic's address is
// known, and the Provisioning fields that reach the agent's image.
func TestICC(t *testing.T) {
	ipv6 := metal3.ProvisioningSpec{ProvisioningInterface: "eth1", ProvisioningIP: "fd00:1101::3", ProvisioningNetworkCIDR: "fd00:1101::/64",
		ProvisioningNetwork: metal3.ProvisioningNetworkUnmanaged}
	for name, tc := range map[string]struct {
		in       Input
		replicas int32
		// env of the controller's container ("" means: not set).
		env     map[string]string
		nsFlag  bool
		waiting bool
	}{
		"provisioning network: the provisioning IP": {
			in: iccInput(managed, "192.168.111.10"), replicas: 1, nsFlag: true,
			env: map[string]string{
				"IRONIC_BASE_URL":   "https://172.22.0.3:6385",
				"IRONIC_ROOTFS_URL": "http://172.22.0.3:6180/images/ironic-python-agent.rootfs",
				"IP_OPTIONS":        "ip=dhcp", "IRONIC_AGENT_IMAGE": "quay.io/mf/ironic-agent:1",
				"CA_BUNDLE": "/certs/ca/ironic/ca.crt", "ADDITIONAL_NTP_SERVERS": "",
				"DEPLOY_ISO":    "/shared/html/images/ironic-python-agent.iso",
				"DEPLOY_INITRD": "/shared/html/images/ironic-python-agent.initramfs",
				"DEPLOY_KERNEL": "/shared/html/images/ironic-python-agent.kernel",
				"POD_NAMESPACE": "<metadata.namespace>",
			},
		},
		"no provisioning network: the metal3 pod's node": {
			in: iccInput(metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}, "192.168.111.10", "fd00::10"), replicas: 1, nsFlag: true,
			env: map[string]string{"IRONIC_BASE_URL": "https://192.168.111.10:6385,https://[fd00::10]:6385",
				"IRONIC_ROOTFS_URL": "http://192.168.111.10:6180/images/ironic-python-agent.rootfs"},
		},
		"no provisioning network, the metal3 pod has no address yet: scaled to zero": {
			in: iccInput(metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}), replicas: 0, nsFlag: true, waiting: true,
			env: map[string]string{"IRONIC_BASE_URL": "", "IRONIC_ROOTFS_URL": "", "IRONIC_AGENT_IMAGE": "quay.io/mf/ironic-agent:1"},
		},
		"external IPs win": {
			in: func() Input {
				s := managed
				s.ExternalIPs = []string{"10.0.0.5", "fd00::5"}
				return iccInput(s, "192.168.111.10")
			}(), replicas: 1, nsFlag: true,
			env: map[string]string{"IRONIC_BASE_URL": "https://10.0.0.5:6385,https://[fd00::5]:6385"},
		},
		"virtual media over the external network: the node's address": {
			in: func() Input {
				s := managed
				s.VirtualMediaViaExternalNetwork = true
				return iccInput(s, "192.168.111.10")
			}(), replicas: 1, nsFlag: true,
			env: map[string]string{"IRONIC_BASE_URL": "https://192.168.111.10:6385"},
		},
		"IPv6 provisioning network": {
			in: iccInput(ipv6), replicas: 1, nsFlag: true,
			env: map[string]string{"IRONIC_BASE_URL": "https://[fd00:1101::3]:6385", "IP_OPTIONS": "ip=dhcp6",
				"IRONIC_ROOTFS_URL": "http://[fd00:1101::3]:6180/images/ironic-python-agent.rootfs"},
		},
		"NTP servers, the agent image override, every namespace": {
			in: func() Input {
				s := managed
				s.AdditionalNTPServers = []string{"0.pool.ntp.org", "192.168.1.1"}
				s.UnsupportedConfigOverrides = &metal3.UnsupportedConfigOverrides{IronicAgentImage: "registry.example.com/ipa:debug"}
				s.WatchAllNamespaces = true
				return iccInput(s)
			}(), replicas: 1,
			env: map[string]string{"ADDITIONAL_NTP_SERVERS": "0.pool.ntp.org,192.168.1.1", "IRONIC_AGENT_IMAGE": "registry.example.com/ipa:debug"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := Render(tc.in)
			d, svc, sec := iccObjects(s)
			if d == nil || svc == nil || sec == nil || s.ICC != d || len(s.Absent) != 0 {
				t.Fatalf("objects %v %v %v, absent %v", d != nil, svc != nil, sec != nil, s.Absent)
			}
			if *d.Spec.Replicas != tc.replicas || (len(s.Waiting) > 0) != tc.waiting {
				t.Errorf("replicas %d, waiting %q", *d.Spec.Replicas, s.Waiting)
			}
			c := container(t, d, "machine-image-customization-controller")
			e := env(c)
			for k, want := range tc.env {
				if got, ok := e[k]; got != want || ok != (want != "") {
					t.Errorf("%s = %q (set %v), want %q", k, got, ok, want)
				}
			}
			if got := slices.Contains(c.Args, "-namespace=$(POD_NAMESPACE)"); got != tc.nsFlag {
				t.Errorf("args %v: namespace flag %v, want %v", c.Args, got, tc.nsFlag)
			}
			if !slices.Contains(c.Args, "-images-publish-addr=http://metal3-image-customization-service.openshift-machine-api.svc.cluster.local") {
				t.Errorf("args %v: publish address", c.Args)
			}
			// The Secret the assisted service reads says the same.
			if string(sec.Data["IRONIC_AGENT_IMAGE"]) != e["IRONIC_AGENT_IMAGE"] || string(sec.Data["IRONIC_BASE_URL"]) != e["IRONIC_BASE_URL"] {
				t.Errorf("config Secret %q", sec.Data)
			}
			// Service port 80 → the controller's image server, selecting its pod.
			if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort.IntVal != ICCPort {
				t.Errorf("service ports %+v", p)
			}
			for k, v := range svc.Spec.Selector {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("the Service selects %s=%s, the pod is labelled %v", k, v, d.Spec.Template.Labels)
				}
			}
			if d.Spec.Template.Annotations[TLSFingerprintAnnotation] != "ca1" {
				t.Error("a new CA does not restart the controller (it reads CA_BUNDLE at start)")
			}
			init := container(t, d, "machine-os-images")
			if init == nil || !slices.Equal(append(init.Command, init.Args...), []string{"/bin/copy-metal", "--all", "/shared/html/images"}) {
				t.Errorf("base images init container %+v", init)
			}
			// The baremetal-operator asks for per-host images and leaves them to this controller.
			b := container(t, s.BMO, "metal3-baremetal-operator")
			if !slices.Contains(b.Args, "--build-preprov-image") || !slices.Contains(b.Args, "--external-preprov-image-builder") {
				t.Errorf("baremetal-operator args %v", b.Args)
			}
			if be := env(b); be["DEPLOY_RAMDISK_URL"] != "" || be["DEPLOY_KERNEL_URL"] == "" {
				t.Errorf("baremetal-operator env %v", be)
			}
			if names := s.Deployments(); len(names) != 3 || names[2] != d {
				t.Errorf("deployments %v", names)
			}
		})
	}
}

// TestICCProxy: the controller goes through the cluster proxy except to Ironic; Ironic, which
// downloads every image from the controller, reaches it directly.
func TestICCProxy(t *testing.T) {
	in := iccInput(managed)
	in.Proxy = &Proxy{HTTPSProxy: "http://proxy:3128", NoProxy: ".example.com"}
	s := Render(in)
	d, _, _ := iccObjects(s)
	e := env(container(t, d, "machine-image-customization-controller"))
	if e["HTTPS_PROXY"] != "http://proxy:3128" || e["NO_PROXY"] != ".example.com,172.22.0.3" {
		t.Errorf("controller proxy env %v", e)
	}
	ironicNoProxy := env(container(t, s.Metal3, "metal3-ironic"))["NO_PROXY"]
	for _, want := range []string{"metal3-image-customization-service.openshift-machine-api.svc", "metal3-image-customization-service.openshift-machine-api.svc.cluster.local"} {
		if !slices.Contains(strings.Split(ironicNoProxy, ","), want) {
			t.Errorf("Ironic's NO_PROXY %q lacks %s", ironicNoProxy, want)
		}
	}
}

// TestICCReadsWhatIsRendered: every environment variable and flag given to the controller is one
// cmd/image-customization-controller reads (its source is the reference, not OpenShift's list);
// POD_NAMESPACE is expanded into an argument and the proxy variables are Go's.
func TestICCReadsWhatIsRendered(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "cmd", "image-customization-controller", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{"POD_NAMESPACE": true, "HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true}
	for _, m := range regexp.MustCompile(`os\.Getenv\("([A-Z_]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		read[m[1]] = true
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`fs\.(?:\w+Var|Func)\((?:&o\.\w+, )?"([a-z-]+)"`).FindAllStringSubmatch(string(src), -1) {
		flags[m[1]] = true
	}
	if len(read) < 10 || len(flags) < 8 {
		t.Fatalf("found only %v and %v in the controller's source", read, flags)
	}
	s := Render(func() Input {
		sp := managed
		sp.AdditionalNTPServers = []string{"pool.ntp.org"}
		in := iccInput(sp)
		in.Proxy = &Proxy{HTTPProxy: "http://p:3128", HTTPSProxy: "http://p:3128", NoProxy: "x"}
		return in
	}())
	d, _, _ := iccObjects(s)
	c := container(t, d, "machine-image-customization-controller")
	for name := range env(c) {
		if !read[name] {
			t.Errorf("the controller is given %s, which it does not read", name)
		}
	}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !flags[name] {
			t.Errorf("the controller is given flag %s, which it does not have", a)
		}
	}
}

func TestCheckICC(t *testing.T) {
	in := iccInput(managed)
	if err := CheckICC(in); err != nil {
		t.Errorf("complete: %v", err)
	}
	in.Images.IronicAgent = ""
	if err := CheckICC(in); err == nil || !strings.Contains(err.Error(), "baremetalIronicAgent") || !strings.Contains(err.Error(), "spec.unsupportedConfigOverrides.ironicAgentImage") {
		t.Errorf("no agent image: %v", err)
	}
	in.Spec.UnsupportedConfigOverrides = &metal3.UnsupportedConfigOverrides{IronicAgentImage: "registry.example.com/ipa:1"}
	if err := CheckICC(in); err != nil {
		t.Errorf("the override stands in: %v", err)
	}
	if err := CheckICC(input(managed)); err != nil {
		t.Errorf("without the controller: %v", err)
	}
}

func TestSortAddresses(t *testing.T) {
	got := SortAddresses([]string{"fd00::10", "192.168.111.11", "not-an-ip", "192.168.111.10", "192.168.111.11", "::ffff:10.0.0.1"})
	if want := []string{"10.0.0.1", "192.168.111.10", "192.168.111.11", "fd00::10"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// TestConfigAddresses: the addresses read back from the config Secret are the ones its Ironic URLs
// were rendered from (the operator keeps them while the metal3 pod is replaced).
func TestConfigAddresses(t *testing.T) {
	in := input(metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled})
	in.Images = iccImages
	in.IronicHostIPs = []string{"192.168.111.10", "fd00:1101::10"}
	s := Render(in)
	var cfg *corev1.Secret
	for _, obj := range s.Objects {
		if c, ok := obj.(*corev1.Secret); ok && c.Name == ICCConfigSecret {
			cfg = c
		}
	}
	if cfg == nil {
		t.Fatal("no config Secret rendered")
	}
	if got := ConfigAddresses(cfg.Data); !slices.Equal(got, in.IronicHostIPs) {
		t.Errorf("addresses %q from %q, want %q", got, cfg.Data[envIronicBaseURL], in.IronicHostIPs)
	}
	if got := ConfigAddresses(map[string][]byte{}); len(got) != 0 {
		t.Errorf("addresses %q from no URL", got)
	}
}

// TestICCPullSecret: with the cluster's pull secret, the controller reads the operator's copy from
// the file cmd/image-customization-controller looks for (read-only, the one key), and its pod
// template carries the copy's digest, so a rotated secret restarts it (it reads the file only at
// start); without one there is no volume, mount or annotation. No variable carries the secret.
func TestICCPullSecret(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "cmd", "image-customization-controller", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`pullSecretFile = "([^"]+)"`).FindStringSubmatch(string(src))
	if m == nil {
		t.Fatal("the controller's source names no pullSecretFile")
	}
	readsFrom := m[1]

	without := iccInput(managed, "192.168.111.10")
	with := without
	with.PullSecretFingerprint = "0123456789abcdef"
	rotated := without
	rotated.PullSecretFingerprint = "fedcba9876543210"

	// mounted returns the pull secret's volume and mount in the controller's pod, and its annotation.
	mounted := func(in Input) (*corev1.Volume, *corev1.VolumeMount, string, *appsv1.Deployment) {
		t.Helper()
		d, _, _ := iccObjects(Render(in))
		var vol *corev1.Volume
		for i, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == secrets.PullSecret {
				vol = &d.Spec.Template.Spec.Volumes[i]
			}
		}
		var mount *corev1.VolumeMount
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			for i, vm := range c.VolumeMounts {
				if vm.MountPath == readsFrom || (vol != nil && vm.Name == vol.Name) {
					if c.Name != "machine-image-customization-controller" || mount != nil {
						t.Errorf("container %s mounts the pull secret too", c.Name)
						continue
					}
					mount = &c.VolumeMounts[i]
				}
			}
			for _, e := range c.Env {
				if strings.Contains(e.Name, "PULL_SECRET") || (e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secrets.PullSecret) {
					t.Errorf("container %s gets the pull secret in variable %s", c.Name, e.Name)
				}
			}
		}
		ann, ok := d.Spec.Template.Annotations[PullSecretFingerprintAnnotation]
		if ok && ann == "" {
			t.Error("an empty pull secret fingerprint annotation")
		}
		return vol, mount, ann, d
	}

	if vol, mount, ann, _ := mounted(without); vol != nil || mount != nil || ann != "" {
		t.Errorf("without a pull secret: volume %+v, mount %+v, annotation %q", vol, mount, ann)
	}
	vol, mount, ann, d := mounted(with)
	if vol == nil || mount == nil {
		t.Fatalf("with a pull secret: volume %+v, mount %+v", vol, mount)
	}
	if items := vol.Secret.Items; len(items) != 1 || items[0].Key != secrets.KeyDockerConfigJSON || vol.Secret.Optional != nil {
		t.Errorf("volume %+v: want the one key %s, required", vol.Secret, secrets.KeyDockerConfigJSON)
	}
	if mount.MountPath != readsFrom || mount.SubPath != vol.Secret.Items[0].Path || !mount.ReadOnly {
		t.Errorf("mount %+v: want %s, read-only, the key's file as subPath", mount, readsFrom)
	}
	if ann != with.PullSecretFingerprint {
		t.Errorf("annotation %q, want the digest %q", ann, with.PullSecretFingerprint)
	}
	_, _, annRotated, dRotated := mounted(rotated)
	if annRotated != rotated.PullSecretFingerprint {
		t.Errorf("a rotated pull secret: annotation %q, want %q", annRotated, rotated.PullSecretFingerprint)
	}
	dRotated.Spec.Template.Annotations[PullSecretFingerprintAnnotation] = ann
	if !reflect.DeepEqual(d.Spec, dRotated.Spec) {
		t.Error("a rotated pull secret changes more than the digest")
	}
}
