package render

import (
	"net/netip"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/ironicrunner"
	"github.com/metalforge/metalforge/internal/webhooks"
)

// Stack is what the components build, in the order they are applied.
type Stack struct {
	// Metal3 and BMO are the two Deployments every stack has; later components may adjust them.
	Metal3, BMO *appsv1.Deployment
	// ICC is the image-customization-controller's Deployment (nil when the stack has none).
	ICC *appsv1.Deployment
	// Objects are every object, Deployments included, in apply order.
	Objects []client.Object
	// AfterBMO are objects applied only once the baremetal-operator is available: its webhook
	// configuration (with failurePolicy Fail, every host write would fail until it answers).
	AfterBMO []client.Object
	// Absent are objects (kind, namespace and name only) this configuration does not have: a
	// component that is turned off lists its objects, so that a stack that had them loses them.
	Absent []client.Object
	// Waiting says what the stack waits for before it can be complete, whatever the Deployments
	// report (a Deployment scaled to zero until it can run).
	Waiting []string
}

// Deployments are the stack's Deployments, in apply order.
func (s *Stack) Deployments() []*appsv1.Deployment {
	out := []*appsv1.Deployment{s.Metal3, s.BMO}
	if s.ICC != nil {
		out = append(out, s.ICC)
	}
	return out
}

// component adds its part to the stack.
type component struct {
	name  string
	order int
	build func(in *Input, s *Stack)
}

var components []component

// register adds a component; order sorts them (a later component sees the earlier ones' objects).
func register(c component) {
	components = append(components, c)
	slices.SortStableFunc(components, func(a, b component) int { return a.order - b.order })
}

// Render builds the stack for in.
func Render(in Input) *Stack {
	s := &Stack{}
	for _, c := range components {
		c.build(&in, s)
	}
	return s
}

// mode is the effective provisioning network mode.
func (in *Input) mode() metal3.ProvisioningNetwork { return webhooks.ProvisioningNetworkMode(&in.Spec) }

func (in *Input) networkDisabled() bool { return in.mode() == metal3.ProvisioningNetworkDisabled }

// provisioningIP is Ironic's address on the provisioning network: none without one (Disabled),
// whatever the spec still says. A provisioningIP left from a Managed or Unmanaged network is put
// on no interface of a Disabled stack (it has no static-IP containers): Ironic would wait for it
// for ever, and hosts would be sent to it. OpenShift's operator ignores it too (OCPBUGS-29660).
func (in *Input) provisioningIP() string {
	if in.networkDisabled() {
		return ""
	}
	return in.Spec.ProvisioningIP
}

// provisioningIPWithPrefix is "ip/prefix" of the provisioning network ("" when there is none).
func (in *Input) provisioningIPWithPrefix() string {
	p, err := netip.ParsePrefix(in.Spec.ProvisioningNetworkCIDR)
	if err != nil || in.provisioningIP() == "" {
		return ""
	}
	return netip.PrefixFrom(netip.MustParseAddr(in.provisioningIP()), p.Bits()).String()
}

// networkAddress is an address of the provisioning network (invalid when Disabled or unknown):
// hosts booted over it reach Ironic in its family.
func (in *Input) networkAddress() netip.Addr {
	if in.networkDisabled() {
		return netip.Addr{}
	}
	if p, err := netip.ParsePrefix(in.Spec.ProvisioningNetworkCIDR); err == nil {
		return p.Addr()
	}
	a, _ := netip.ParseAddr(in.provisioningIP())
	return a
}

// ipOptions is the agent's kernel ip= option for the families of the addresses hosts reach Ironic
// on: the provisioning network's, and those of the addresses they are given as Ironic's URL
// (IronicAddresses: the external IPs, the provisioning IP, or the node's). The Ironic runner's
// rule (ironicrunner.AgentIPOptions), which decides where only the running pod knows the address.
// OpenShift's operator takes the cluster network's families instead, which this renderer is not
// given.
func (in *Input) ipOptions() string {
	addrs := []netip.Addr{in.networkAddress()}
	for _, s := range in.IronicAddresses() {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a)
		}
	}
	return ironicrunner.AgentIPOptions(addrs...)
}

// metal3IPOptions is ipOptions for the metal3 pod, ok false when it depends on the node's address
// (ironicOnNode). The renderer knows that address only from the metal3 pod's own endpoints: a
// template that followed them would change once the pod runs, and back when its Recreate rollout
// leaves no endpoint, without end. The Ironic runner, which resolves the address, decides then.
func (in *Input) metal3IPOptions() (options string, ok bool) {
	if in.ironicOnNode() {
		return "", false
	}
	return in.ipOptions(), true
}

// labels of a component's objects.
func labels(component string) map[string]string {
	return map[string]string{ComponentLabel: component}
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

// proxyEnv is the cluster proxy for a container; noProxy are addresses that must never go through
// it (Ironic's own).
func (in *Input) proxyEnv(noProxy ...string) []corev1.EnvVar {
	if in.Proxy == nil || (in.Proxy.HTTPProxy == "" && in.Proxy.HTTPSProxy == "") {
		return nil
	}
	var env []corev1.EnvVar
	if in.Proxy.HTTPProxy != "" {
		env = append(env, envVar("HTTP_PROXY", in.Proxy.HTTPProxy))
	}
	if in.Proxy.HTTPSProxy != "" {
		env = append(env, envVar("HTTPS_PROXY", in.Proxy.HTTPSProxy))
	}
	no := slices.DeleteFunc(append([]string{in.Proxy.NoProxy}, noProxy...), func(s string) bool { return s == "" })
	if len(no) > 0 {
		env = append(env, envVar("NO_PROXY", strings.Join(no, ",")))
	}
	return env
}

// secretVolume projects only keys of a Secret (a TLS Secret's CA key never reaches a pod). The
// files get the default mode (0644): the operator images run as a non-root user, which must read
// them.
func secretVolume(name, secret string, keys ...string) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	for _, k := range keys {
		v.Secret.Items = append(v.Secret.Items, corev1.KeyToPath{Key: k, Path: k})
	}
	return v
}

func emptyDirVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func ptrTo[T any](v T) *T { return &v }
