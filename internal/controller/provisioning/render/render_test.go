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
			containers: []string{"init:metal3-static-ip-set", "init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd", "metal3-static-ip-manager"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "172.22.0.3/24"},
		},
		"disabled, no IP: the host's": {
			spec:       metal3.ProvisioningSpec{ProvisioningNetwork: "Disabled"},
			containers: []string{"init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "<status.hostIP>", "PROVISIONING_INTERFACE": ""},
		},
		"disabled with an IP and an interface": {
			spec:       metal3.ProvisioningSpec{ProvisioningNetwork: "Disabled", ProvisioningIP: "192.168.111.5", ProvisioningNetworkCIDR: "192.168.111.0/24", ProvisioningInterface: "eth0"},
			containers: []string{"init:metal3-machine-os-images", "metal3-ironic", "metal3-httpd"},
			ironicEnv:  map[string]string{"PROVISIONING_IP": "192.168.111.5", "PROVISIONING_INTERFACE": ""},
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
	if svc == nil || len(svc.Spec.Ports) != 3 || svc.Spec.Selector["k8s-app"] != "metal3" {
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
