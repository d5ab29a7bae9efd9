package render

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

var testImages = Images{BaremetalOperator: "quay.io/mf/baremetal-operator:1", Ironic: "quay.io/mf/ironic:1", MachineOSImages: "quay.io/mf/machine-os-images:1"}

func input(spec metal3.ProvisioningSpec) Input {
	return Input{
		Namespace: "openshift-machine-api", Spec: spec, Images: testImages,
		Platform:             platform.Features{Platform: "BareMetal", Modes: []metal3.ProvisioningNetwork{"Managed", "Unmanaged", "Disabled"}},
		IronicTLSFingerprint: "tls1", IronicCAFingerprint: "ca1", BMOWebhookCABundle: []byte("bundle"),
	}
}

var managed = metal3.ProvisioningSpec{
	ProvisioningInterface: "eth1", ProvisioningIP: "172.22.0.3", ProvisioningNetworkCIDR: "172.22.0.0/24",
	ProvisioningDHCPRange: "172.22.0.10, 172.22.0.100", ProvisioningNetwork: metal3.ProvisioningNetworkManaged,
}

func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for _, list := range [][]corev1.Container{d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func names(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.InitContainers {
		out = append(out, "init:"+c.Name)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// env renders a container's environment as NAME=value, NAME=<field path> or NAME=<secret/key>.
func env(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			out[e.Name] = "<" + e.ValueFrom.FieldRef.FieldPath + ">"
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "<" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key + ">"
		}
	}
	return out
}

// TestMetal3PerMode: what each network mode runs, and where Ironic finds its address.
func TestMetal3PerMode(t *testing.T) {
	for name, tc := range map[string]struct {
		spec       metal3.ProvisioningSpec
		containers []string
		ironicEnv  map[string]string // subset; "" = must be absent
		dnsmasqEnv map[string]string
	}{
		"managed": {
			spec:       managed,
			containers: []string{"init:metal3-static-ip-set", "init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-static-ip-manager", "metal3-dnsmasq"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "172.22.0.3/24", "PROVISIONING_INTERFACE": "eth1", "IRONIC_EXTERNAL_IP": "", "VMEDIA_TLS_PORT": "6183"},
			dnsmasqEnv: map[string]string{"DHCP_RANGE": "172.22.0.10,172.22.0.100,24", "GATEWAY_IP": "", "DNS_IP": ""},
		},
		"managed with gateway, DNS and MACs": {
			spec: func() metal3.ProvisioningSpec {
				s := managed
				s.ProvisioningInterface, s.ProvisioningMacAddresses = "", []string{"00:5a:91:3f:9a:bd", "00:5a:91:3f:9a:be"}
				s.ProvisioningNetworkGateway, s.ProvisioningDNS = "172.22.0.1", true
				return s
			}(),
			containers: []string{"init:metal3-static-ip-set", "init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-static-ip-manager", "metal3-dnsmasq"},
			ironicEnv:  map[string]string{"PROVISIONING_MACS": "00:5a:91:3f:9a:bd,00:5a:91:3f:9a:be", "PROVISIONING_INTERFACE": ""},
			dnsmasqEnv: map[string]string{"GATEWAY_IP": "172.22.0.1", "DNS_IP": "provisioning"},
		},
		"managed IPv6": {
			spec: func() metal3.ProvisioningSpec {
				s := managed
				s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningDHCPRange = "fd00:1101::3", "fd00:1101::/64", "fd00:1101::a,fd00:1101::ffff"
				return s
			}(),
			containers: []string{"init:metal3-static-ip-set", "init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-static-ip-manager", "metal3-dnsmasq"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "fd00:1101::3/64", "IRONIC_KERNEL_PARAMS": "rd.net.timeout.carrier=30 ip=dhcp6"},
			dnsmasqEnv: map[string]string{"DHCP_RANGE": "fd00:1101::a,fd00:1101::ffff,64"},
		},
		"unmanaged": {
			spec: func() metal3.ProvisioningSpec {
				s := managed
				s.ProvisioningNetwork, s.ProvisioningDHCPRange = "Unmanaged", ""
				return s
			}(),
			// dnsmasq serves TFTP only: the user's DHCP server points PXE hosts at Ironic.
			containers: []string{"init:metal3-static-ip-set", "init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-static-ip-manager", "metal3-dnsmasq"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "172.22.0.3/24"},
			dnsmasqEnv: map[string]string{"DHCP_RANGE": "", "GATEWAY_IP": "", "DNS_IP": ""},
		},
		// Neither interface nor MACs: Ironic uses the interface that already holds the IP, which
		// is someone else's address to keep: no static-IP container gives it a lifetime or
		// deletes it when the pod stops (after which no pod could find the interface again).
		"managed, the IP already on an interface": {
			spec: func() metal3.ProvisioningSpec {
				s := managed
				s.ProvisioningInterface = ""
				return s
			}(),
			containers: []string{"init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-dnsmasq"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "172.22.0.3/24", "PROVISIONING_INTERFACE": "", "PROVISIONING_MACS": ""},
		},
		"disabled, no IP: the host's": {
			spec:       metal3.ProvisioningSpec{ProvisioningNetwork: "Disabled"},
			containers: []string{"init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "<status.hostIP>", "PROVISIONING_INTERFACE": ""},
		},
		// An IP and an interface left over from a provisioning network are ignored: no container
		// of a Disabled stack puts that IP on an interface, so Ironic would wait for it for ever
		// (TestDisabledIgnoresProvisioningIP).
		"disabled with an IP and an interface": {
			spec:       metal3.ProvisioningSpec{ProvisioningNetwork: "Disabled", ProvisioningIP: "192.168.111.5", ProvisioningNetworkCIDR: "192.168.111.0/24", ProvisioningInterface: "eth0"},
			containers: []string{"init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "<status.hostIP>", "PROVISIONING_INTERFACE": ""},
		},
		"disabled, external IPs, no vmedia TLS": {
			spec:       metal3.ProvisioningSpec{ProvisioningNetwork: "Disabled", ExternalIPs: []string{"10.0.0.5", "fd00::5"}, DisableVirtualMediaTLS: true},
			containers: []string{"init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd"},
			ironicEnv:  map[string]string{"IRONIC_EXTERNAL_IP": "10.0.0.5", "VMEDIA_TLS_PORT": ""},
		},
		"virtual media over the external network": {
			spec:       func() metal3.ProvisioningSpec { s := managed; s.VirtualMediaViaExternalNetwork = true; return s }(),
			containers: []string{"init:metal3-static-ip-set", "init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-static-ip-manager", "metal3-dnsmasq"},
			ironicEnv:  map[string]string{"IRONIC_EXTERNAL_IP": "<status.hostIP>"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := Render(input(tc.spec))
			if got := names(s.Metal3); !slices.Equal(got, tc.containers) {
				t.Fatalf("containers %v, want %v", got, tc.containers)
			}
			ironicEnv := env(container(t, s.Metal3, "metal3-ironic"))
			for k, want := range tc.ironicEnv {
				if got, ok := ironicEnv[k]; want == "" && ok || want != "" && got != want {
					t.Errorf("ironic %s = %q (set %v), want %q", k, got, ok, want)
				}
			}
			if tc.dnsmasqEnv != nil {
				got := env(container(t, s.Metal3, "metal3-dnsmasq"))
				for k, want := range tc.dnsmasqEnv {
					if v, ok := got[k]; want == "" && ok || want != "" && v != want {
						t.Errorf("dnsmasq %s = %q (set %v), want %q", k, v, ok, want)
					}
				}
			}
			if ironicEnv["IRONIC_HTPASSWD"] != "<"+secrets.IronicCredentials+"/htpasswd>" {
				t.Errorf("IRONIC_HTPASSWD = %q: want it from the credentials Secret", ironicEnv["IRONIC_HTPASSWD"])
			}
			for _, c := range s.Metal3.Spec.Template.Spec.Containers {
				if c.Command[0] != RunnerPath && c.Name != "metal3-machine-os-images" {
					t.Errorf("%s runs %v, not the Ironic runner", c.Name, c.Command)
				}
			}
		})
	}
}

// TestMetal3Pod: host network, Recreate, control-plane placement (none for a hosted control
// plane), the TLS fingerprint on the template, and the CA key never mounted.
func TestMetal3Pod(t *testing.T) {
	in := input(managed)
	d := Render(in).Metal3
	pod := d.Spec.Template.Spec
	if !pod.HostNetwork || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || pod.NodeSelector[ControlPlaneLabel] != "" || len(pod.NodeSelector) != 1 {
		t.Errorf("hostNetwork %v, strategy %s, nodeSelector %v", pod.HostNetwork, d.Spec.Strategy.Type, pod.NodeSelector)
	}
	if d.Spec.Template.Annotations[TLSFingerprintAnnotation] != "tls1" || d.Annotations[OwnedAnnotation] != "" {
		t.Errorf("annotations %v / %v", d.Annotations, d.Spec.Template.Annotations)
	}
	if _, ok := d.Annotations[OwnedAnnotation]; !ok {
		t.Error("the Deployment is not marked as owned")
	}
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, item := range v.Secret.Items {
			if !slices.Contains(append(secrets.ServingKeys, secrets.KeyUsername, secrets.KeyPassword), item.Key) {
				t.Errorf("volume %s projects key %s", v.Name, item.Key)
			}
		}
		if len(v.Secret.Items) == 0 {
			t.Errorf("volume %s projects the whole Secret %s", v.Name, v.Secret.SecretName)
		}
	}
	in.Platform.ExternalControlPlane = true
	if sel := Render(in).Metal3.Spec.Template.Spec.NodeSelector; sel != nil {
		t.Errorf("hosted control plane: nodeSelector %v", sel)
	}
}

func TestBMO(t *testing.T) {
	for name, tc := range map[string]struct {
		spec         metal3.ProvisioningSpec
		wantNSFlag   bool
		proxy        *Proxy
		wantNoProxy  string
		wantHTTPSPxy string
	}{
		"own namespace":  {spec: managed, wantNSFlag: true},
		"all namespaces": {spec: func() metal3.ProvisioningSpec { s := managed; s.WatchAllNamespaces = true; return s }()},
		"proxy": {spec: managed, wantNSFlag: true, proxy: &Proxy{HTTPSProxy: "http://proxy:3128", NoProxy: ".cluster.local"},
			wantHTTPSPxy: "http://proxy:3128",
			wantNoProxy:  ".cluster.local,metal3-state.openshift-machine-api.svc,metal3-state.openshift-machine-api.svc.cluster.local,172.22.0.3"},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(tc.spec)
			in.Proxy = tc.proxy
			s := Render(in)
			c := container(t, s.BMO, "metal3-baremetal-operator")
			if slices.Contains(c.Args, "--namespace=$(POD_NAMESPACE)") != tc.wantNSFlag {
				t.Errorf("args %v: namespace flag wanted %v", c.Args, tc.wantNSFlag)
			}
			e := env(c)
			for k, want := range map[string]string{
				"IRONIC_ENDPOINT":    "https://metal3-state.openshift-machine-api.svc.cluster.local:6385/v1/",
				"IRONIC_CACERT_FILE": "/certs/ca/ironic/ca.crt", "METAL3_AUTH_ROOT_DIR": "/auth",
				"DEPLOY_KERNEL_URL":  "file:///shared/html/images/ironic-python-agent.kernel",
				"DEPLOY_RAMDISK_URL": "file:///shared/html/images/ironic-python-agent.initramfs",
				"POD_NAMESPACE":      "<metadata.namespace>",
				"HTTPS_PROXY":        tc.wantHTTPSPxy, "NO_PROXY": tc.wantNoProxy,
			} {
				if e[k] != want {
					t.Errorf("%s = %q, want %q", k, e[k], want)
				}
			}
			if _, ok := e["IRONIC_INSECURE"]; ok {
				t.Error("the operator skips verifying Ironic's certificate")
			}
			if s.BMO.Spec.Template.Annotations[TLSFingerprintAnnotation] != "ca1" {
				t.Error("the CA fingerprint is not on the template")
			}
		})
	}
}

func TestStateServiceAndSANs(t *testing.T) {
	in := input(managed)
	in.Spec.ExternalIPs = []string{"10.0.0.5"}
	var svc *corev1.Service
	for _, o := range Render(in).Objects {
		if s, ok := o.(*corev1.Service); ok && s.Name == StateService {
			svc = s
		}
	}
	if svc == nil || len(svc.Spec.Ports) != 3 || svc.Spec.Selector[ComponentLabel] != StateService || len(svc.Spec.Selector) != 1 {
		t.Fatalf("metal3-state %+v", svc)
	}
	in.Spec.DisableVirtualMediaTLS = true
	for _, o := range Render(in).Objects {
		if s, ok := o.(*corev1.Service); ok && s.Name == StateService && len(s.Spec.Ports) != 2 {
			t.Errorf("without virtual media TLS the Service has ports %v", s.Spec.Ports)
		}
	}
	want := []string{"metal3-state.openshift-machine-api.svc", "metal3-state.openshift-machine-api.svc.cluster.local", "172.22.0.3", "10.0.0.5"}
	if got := IronicSANs(in); !slices.Equal(got, want) {
		t.Errorf("SANs %v, want %v", got, want)
	}
}

// TestWebhooksMatchMarkers: the webhook configurations the operator writes have the names, paths
// and rules of config/webhook, which controller-gen writes from the webhook markers.
func TestWebhooksMatchMarkers(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var generated admissionv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(data, &generated); err != nil {
		t.Fatal(err)
	}
	rendered := append(bmoWebhookConfig(&Input{Namespace: "ns"}).Webhooks, CBOWebhookConfiguration("ns", nil).Webhooks...)
	if len(rendered) != len(generated.Webhooks) {
		t.Fatalf("%d rendered webhooks, config/webhook has %d", len(rendered), len(generated.Webhooks))
	}
	for _, g := range generated.Webhooks {
		i := slices.IndexFunc(rendered, func(r admissionv1.ValidatingWebhook) bool { return r.Name == g.Name })
		if i < 0 {
			t.Errorf("webhook %s is not rendered", g.Name)
			continue
		}
		r := rendered[i]
		if *r.ClientConfig.Service.Path != *g.ClientConfig.Service.Path || *r.FailurePolicy != *g.FailurePolicy ||
			*r.SideEffects != *g.SideEffects || !slices.Equal(r.Rules[0].Resources, g.Rules[0].Resources) ||
			!slices.Equal(r.Rules[0].Operations, g.Rules[0].Operations) {
			t.Errorf("webhook %s differs:\nrendered  %+v\ngenerated %+v", g.Name, r, g)
		}
	}
}

func TestParseImages(t *testing.T) {
	for name, tc := range map[string]struct {
		json, wantErr string
	}{
		"complete": {json: `{"baremetalOperator":"a","baremetalIronic":"b","machineOSImages":"c","kubeRBACProxy":"d"}`},
		"missing":  {json: `{"baremetalOperator":"a"}`, wantErr: "has no image for baremetalIronic, machineOSImages"},
		"not JSON": {json: `baremetalOperator: a`, wantErr: "is not a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseImages("images.json", []byte(tc.json))
			if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRenderIsStable: the same input renders the same objects (the controller compares them
// with what runs).
func TestRenderIsStable(t *testing.T) {
	a, b := Render(input(managed)), Render(input(managed))
	ya, _ := yaml.Marshal(a.Objects)
	yb, _ := yaml.Marshal(b.Objects)
	if string(ya) != string(yb) {
		t.Error("two renders of the same input differ")
	}
}

// TestIPOptions: the agent's ip= option (Ironic's kernel parameters, the machine OS images' ISO,
// the image-customization-controller's images) asks for the families of the addresses hosts reach
// Ironic on: the provisioning network's, the external IPs', and, where hosts are sent to the node
// the metal3 pod runs on, the node's. An IPv6-only host asked for DHCPv4 alone never reaches
// Ironic.
func TestIPOptions(t *testing.T) {
	disabled := metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}
	managed6 := managed
	managed6.ProvisioningIP, managed6.ProvisioningNetworkCIDR, managed6.ProvisioningDHCPRange = "fd00:1101::3", "fd00:1101::/64", "fd00:1101::a,fd00:1101::ffff"
	with := func(s metal3.ProvisioningSpec, f func(*metal3.ProvisioningSpec)) metal3.ProvisioningSpec {
		f(&s)
		return s
	}
	for name, tc := range map[string]struct {
		spec    metal3.ProvisioningSpec
		hostIPs []string
		// want is IP_OPTIONS everywhere it is given, and the ip= of IRONIC_KERNEL_PARAMS; "" for
		// the metal3 pod: the runner decides from the node's address (which only the pod knows).
		icc, metal3 string
	}{
		"IPv4 provisioning network":                  {spec: managed, hostIPs: []string{"fd00::10"}, icc: "ip=dhcp", metal3: "ip=dhcp"},
		"IPv6 provisioning network":                  {spec: managed6, hostIPs: []string{"192.168.111.10"}, icc: "ip=dhcp6", metal3: "ip=dhcp6"},
		"disabled, the node's IPv4 address":          {spec: disabled, hostIPs: []string{"192.168.111.10"}, icc: "ip=dhcp"},
		"disabled, the node's IPv6 address":          {spec: disabled, hostIPs: []string{"fd00::10"}, icc: "ip=dhcp6"},
		"disabled, a dual-stack node":                {spec: disabled, hostIPs: []string{"192.168.111.10", "fd00::10"}, icc: "ip=dhcp,dhcp6"},
		"disabled, the node's address not known yet": {spec: disabled, icc: "ip=dhcp"},
		"disabled, IPv6 external IPs": {spec: with(disabled, func(s *metal3.ProvisioningSpec) { s.ExternalIPs = []string{"fd00::5"} }),
			hostIPs: []string{"192.168.111.10"}, icc: "ip=dhcp6", metal3: "ip=dhcp6"},
		"disabled, dual-stack external IPs": {spec: with(disabled, func(s *metal3.ProvisioningSpec) { s.ExternalIPs = []string{"10.0.0.5", "fd00::5"} }),
			hostIPs: []string{"fd00::10"}, icc: "ip=dhcp,dhcp6", metal3: "ip=dhcp,dhcp6"},
		"disabled, a provisioning network left over": {spec: with(disabled, func(s *metal3.ProvisioningSpec) {
			s.ProvisioningIP, s.ProvisioningNetworkCIDR = "172.22.0.3", "172.22.0.0/24"
		}), hostIPs: []string{"fd00::10"}, icc: "ip=dhcp6"},
		"IPv4 provisioning network, IPv6 external IPs": {spec: with(managed, func(s *metal3.ProvisioningSpec) { s.ExternalIPs = []string{"fd00::5"} }),
			icc: "ip=dhcp,dhcp6", metal3: "ip=dhcp,dhcp6"},
		"IPv4 provisioning network, virtual media over an IPv6 external network": {
			spec:    with(managed, func(s *metal3.ProvisioningSpec) { s.VirtualMediaViaExternalNetwork = true }),
			hostIPs: []string{"fd00::10"}, icc: "ip=dhcp,dhcp6"},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(tc.spec)
			in.Images, in.IronicHostIPs = iccImages, tc.hostIPs
			s := Render(in)
			d, _, _ := iccObjects(s)
			for _, c := range []string{"machine-image-customization-controller", "machine-os-images"} {
				if got := env(container(t, d, c))["IP_OPTIONS"]; got != tc.icc {
					t.Errorf("image-customization-controller %s: IP_OPTIONS=%q, want %q", c, got, tc.icc)
				}
			}
			ironic := env(container(t, s.Metal3, "metal3-ironic"))
			images, hasOptions := env(container(t, s.Metal3, "metal3-machine-os-images"))["IP_OPTIONS"]
			if tc.metal3 == "" {
				// The runner adds ip= for the address it resolved (status.hostIP); copy-metal --pxe
				// reads no IP_OPTIONS (only the ISO it copies with --all gets them).
				if ironic["IRONIC_KERNEL_PARAMS"] != "rd.net.timeout.carrier=30" || ironic["IRONIC_KERNEL_IP_FROM_ADDRESSES"] != "true" || hasOptions {
					t.Errorf("metal3: IRONIC_KERNEL_PARAMS=%q IRONIC_KERNEL_IP_FROM_ADDRESSES=%q, machine OS images IP_OPTIONS=%q (set %v): want the runner to decide",
						ironic["IRONIC_KERNEL_PARAMS"], ironic["IRONIC_KERNEL_IP_FROM_ADDRESSES"], images, hasOptions)
				}
				return
			}
			if want := "rd.net.timeout.carrier=30 " + tc.metal3; ironic["IRONIC_KERNEL_PARAMS"] != want || images != tc.metal3 {
				t.Errorf("metal3: IRONIC_KERNEL_PARAMS=%q, machine OS images IP_OPTIONS=%q; want %q and %q", ironic["IRONIC_KERNEL_PARAMS"], images, want, tc.metal3)
			}
			if _, ok := ironic["IRONIC_KERNEL_IP_FROM_ADDRESSES"]; ok {
				t.Error("metal3: the runner is asked to decide ip= although the spec says it")
			}
		})
	}
}

// TestMetal3IgnoresNodeAddress: the metal3 pod's template never depends on the node's address
// (IronicHostIPs, read from the pod's own endpoints). If it did, the address would change the
// template once the pod runs, and the Recreate rollout, which leaves no endpoint, would change it
// back, without end.
func TestMetal3IgnoresNodeAddress(t *testing.T) {
	for name, spec := range map[string]metal3.ProvisioningSpec{
		"managed":                managed,
		"disabled":               {ProvisioningNetwork: metal3.ProvisioningNetworkDisabled},
		"disabled, external IPs": {ProvisioningNetwork: metal3.ProvisioningNetworkDisabled, ExternalIPs: []string{"fd00::5"}},
		"virtual media over the external network": func() metal3.ProvisioningSpec { s := managed; s.VirtualMediaViaExternalNetwork = true; return s }(),
	} {
		t.Run(name, func(t *testing.T) {
			var first string
			for _, hostIPs := range [][]string{nil, {"192.168.111.10"}, {"fd00::10"}, {"192.168.111.10", "fd00::10"}} {
				in := input(spec)
				in.Images, in.IronicHostIPs = iccImages, hostIPs
				y, err := yaml.Marshal(Render(in).Metal3)
				if err != nil {
					t.Fatal(err)
				}
				if first == "" {
					first = string(y)
				} else if string(y) != first {
					t.Fatalf("the metal3 Deployment with the node's addresses %v differs from the one without", hostIPs)
				}
			}
		})
	}
}

// TestDisabledIgnoresProvisioningIP: a provisioningIP left from a Managed or Unmanaged network
// (switched to Disabled) is no address anywhere: no container of a Disabled stack puts it on an
// interface, so Ironic would wait for it for ever and hosts would be sent to it. Ironic's address
// is the node's, as OpenShift's operator does (OCPBUGS-29660).
func TestDisabledIgnoresProvisioningIP(t *testing.T) {
	spec := metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled, ProvisioningIP: "172.22.0.3",
		ProvisioningNetworkCIDR: "172.22.0.0/24", ProvisioningInterface: "eth1"}
	in := input(spec)
	in.Images, in.IronicHostIPs = iccImages, []string{"192.168.111.10"}
	in.Proxy = &Proxy{HTTPSProxy: "http://proxy:3128"}
	s := Render(in)
	for _, c := range append(s.Metal3.Spec.Template.Spec.InitContainers, s.Metal3.Spec.Template.Spec.Containers...) {
		e := env(&c)
		if v, ok := e["PROVISIONING_IP"]; ok && v != "<status.hostIP>" {
			t.Errorf("%s: PROVISIONING_IP=%s, want the node's (status.hostIP)", c.Name, v)
		}
		if strings.Contains(e["NO_PROXY"], "172.22.0.3") {
			t.Errorf("%s: NO_PROXY=%s names the left-over IP", c.Name, e["NO_PROXY"])
		}
	}
	if e := env(container(t, s.Metal3, "metal3-ironic")); e["PROVISIONING_IP"] != "<status.hostIP>" {
		t.Errorf("Ironic's PROVISIONING_IP=%q, want the node's", e["PROVISIONING_IP"])
	}
	d, _, sec := iccObjects(s)
	if e := env(container(t, d, "machine-image-customization-controller")); e["IRONIC_BASE_URL"] != "https://192.168.111.10:6385" || strings.Contains(e["NO_PROXY"], "172.22.0.3") {
		t.Errorf("image-customization-controller IRONIC_BASE_URL=%q NO_PROXY=%q: want the node's address only", e["IRONIC_BASE_URL"], e["NO_PROXY"])
	}
	if got := string(sec.Data["IRONIC_BASE_URL"]); got != "https://192.168.111.10:6385" {
		t.Errorf("config Secret IRONIC_BASE_URL=%q", got)
	}
	if e := env(container(t, s.BMO, "metal3-baremetal-operator")); strings.Contains(e["NO_PROXY"], "172.22.0.3") {
		t.Errorf("baremetal-operator NO_PROXY=%q names the left-over IP", e["NO_PROXY"])
	}
	// It stays a name in Ironic's certificate, which sends no host anywhere (IronicSANs).
	if sans := IronicSANs(in); !slices.Contains(sans, "172.22.0.3") {
		t.Errorf("Ironic's certificate names %v: a switch to Disabled reissues it", sans)
	}
}
