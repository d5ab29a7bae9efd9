package provisioning

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// containerEnv is a container's plain environment values.
func containerEnv(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// bmoBuildsImages reports whether the baremetal-operator Deployment asks for per-host images, and
// whether it still hands out the machine OS images' initramfs.
func bmoBuildsImages(t *testing.T, ns string) (builds, ramdisk bool) {
	t.Helper()
	c := deployment(t, ns, render.BMODeployment).Spec.Template.Spec.Containers[0]
	_, ramdisk = containerEnv(c)["DEPLOY_RAMDISK_URL"]
	return slices.Contains(c.Args, "--build-preprov-image") && slices.Contains(c.Args, "--external-preprov-image-builder"), ramdisk
}

// TestImageCustomizationController: an images file naming the controller deploys it (scaled to
// zero until the metal3 pod's address is known, from the metal3-state Service's endpoints), with
// its Service and config Secret, and turns the baremetal-operator to per-host images; the stack is
// complete only once the controller is available too; an images file without it removes it all.
func TestImageCustomizationController(t *testing.T) {
	op := setup(t, options{images: testImagesICC})
	ctx := context.Background()
	createProvisioning(t, disabled, nil)

	// No endpoints for metal3-state yet: the controller exists but cannot run.
	d := waitDeployment(t, op.ns, render.ICCDeployment)
	if r := d.Spec.Replicas; r == nil || *r != 0 {
		t.Fatalf("replicas %v before the metal3 pod has an address, want 0", r)
	}
	markAvailable(t, op.ns, render.Metal3Deployment)
	markAvailable(t, op.ns, render.BMODeployment)
	c := waitCO(t, map[string]string{"Progressing": "True/SyncingResources"})
	if m := messages(c); !strings.Contains(m, "the metal3 pod's address") {
		t.Errorf("the ClusterOperator does not say what it waits for: %s", m)
	}

	// The metal3 pod runs on a node: its address becomes Ironic's URL for the controller.
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: render.StateService + "-x1", Namespace: op.ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: render.StateService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.168.111.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if err := env.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	const baseURL = "https://192.168.111.10:6385"
	poll.Until(t, "the controller scaled up with Ironic's URL", func() (bool, string) {
		d = deployment(t, op.ns, render.ICCDeployment)
		env := containerEnv(d.Spec.Template.Spec.Containers[0])
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 1 && env["IRONIC_BASE_URL"] == baseURL,
			fmt.Sprintf("replicas %v, IRONIC_BASE_URL %q", d.Spec.Replicas, env["IRONIC_BASE_URL"])
	})
	ctr := d.Spec.Template.Spec.Containers[0]
	if env := containerEnv(ctr); env["IRONIC_AGENT_IMAGE"] != "registry.example.com/mf/ironic-agent:1" {
		t.Errorf("IRONIC_AGENT_IMAGE %q", env["IRONIC_AGENT_IMAGE"])
	}
	if !slices.Contains(ctr.Args, "-images-publish-addr=http://"+render.ICCService+"."+op.ns+".svc.cluster.local") {
		t.Errorf("controller args %v", ctr.Args)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: op.ns, Name: render.ICCService}, svc); err != nil {
		t.Fatal(err)
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort.IntValue() != render.ICCPort {
		t.Errorf("service ports %+v", p)
	}
	poll.Until(t, "the config Secret with Ironic's URL", func() (bool, string) {
		s := secret(t, op.ns, render.ICCConfigSecret)
		if s == nil {
			return false, "missing"
		}
		return string(s.Data["IRONIC_BASE_URL"]) == baseURL && string(s.Data["IRONIC_AGENT_IMAGE"]) == "registry.example.com/mf/ironic-agent:1",
			fmt.Sprintf("data %q", s.Data)
	})
	if builds, ramdisk := bmoBuildsImages(t, op.ns); !builds || ramdisk {
		t.Errorf("baremetal-operator: per-host images %v, machine OS images' initramfs %v; want true, false", builds, ramdisk)
	}

	// Complete once the controller runs too.
	markAvailable(t, op.ns, render.ICCDeployment)
	markAvailable(t, op.ns, render.BMODeployment) // its arguments changed: a new generation
	waitCO(t, map[string]string{"Available": "True/DeployComplete", "Progressing": "False/AsExpected", "Degraded": "False/AsExpected"})
	if gens := getProvisioning(t).Status.Generations; !slices.ContainsFunc(gens, func(g metal3.GenerationStatus) bool { return g.Name == render.ICCDeployment }) {
		t.Errorf("status.generations %+v lack %s", gens, render.ICCDeployment)
	}

	// The images file drops the controller: its objects go, the baremetal-operator boots the
	// machine OS images' agent again.
	since := time.Now()
	if err := writeFile(op.images, testImages); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the controller's objects removed", func() (bool, string) {
		var left []string
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.Secret{}} {
			name := map[string]string{"*v1.Deployment": render.ICCDeployment, "*v1.Service": render.ICCService, "*v1.Secret": render.ICCConfigSecret}[fmt.Sprintf("%T", obj)]
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: op.ns, Name: name}, obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", obj, name, err))
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
	waitEvent(t, since, ReasonRemoved, render.ICCDeployment)
	if builds, ramdisk := bmoBuildsImages(t, op.ns); builds || !ramdisk {
		t.Errorf("baremetal-operator without the controller: per-host images %v, machine OS images' initramfs %v; want false, true", builds, ramdisk)
	}
	markAvailable(t, op.ns, render.BMODeployment)
	waitCO(t, map[string]string{"Available": "True/DeployComplete", "Progressing": "False/AsExpected"})
}

// TestICCPullSecret: the cluster's pull secret (openshift-config/pull-secret) reaches the
// image-customization-controller: the operator copies it into its namespace as Secret pull-secret
// (the auth file as base64 text, owned and labelled like the Secrets it generates) and mounts it
// read-only where the controller reads it. A complete stack follows the cluster's secret at once
// (its watch wakes the operator, which otherwise looks again only at its resync): created, rotated
// (the copy and the digest on the controller's pod template change, which restarts it), removed
// (the copy and the mount go). The secret shows in no event or status.
func TestICCPullSecret(t *testing.T) {
	op := setup(t, options{images: testImagesICC})
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secrets.ClusterPullSecretNamespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	createProvisioning(t, disabled, nil)
	iccStackComplete(t, op.ns)
	if s := secret(t, op.ns, secrets.PullSecret); s != nil {
		t.Fatal("a copy of a pull secret the cluster does not have")
	}
	if mounted, ann := pullSecretMount(t, deployment(t, op.ns, render.ICCDeployment)); mounted || ann != "" {
		t.Fatalf("without a pull secret: mounted %v, digest %q", mounted, ann)
	}
	start := time.Now()

	cluster := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secrets.ClusterPullSecretNamespace, Name: secrets.ClusterPullSecretName},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(testAuth)}}
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), cluster); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the cluster's pull secret: %v", err)
		}
	})
	first := waitPullSecretFollows(t, op.ns, testAuth, "")
	copied := secret(t, op.ns, secrets.PullSecret)
	prov := getProvisioning(t)
	if copied.Labels[render.ComponentLabel] != secretComponent || len(copied.OwnerReferences) != 1 || copied.OwnerReferences[0].UID != prov.UID ||
		copied.Type != corev1.SecretTypeOpaque {
		t.Errorf("the copy: labels %v, owners %v, type %s; want the component label, the Provisioning object, Opaque",
			copied.Labels, copied.OwnerReferences, copied.Type)
	}

	iccStackComplete(t, op.ns)
	cluster.Data[corev1.DockerConfigJsonKey] = []byte(testAuthRotated)
	if err := env.Client.Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	waitPullSecretFollows(t, op.ns, testAuthRotated, first)

	iccStackComplete(t, op.ns)
	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	poll.Within(t, watchWake, "the copy and the mount removed with the cluster's pull secret", func() (bool, string) {
		mounted, ann := pullSecretMount(t, deployment(t, op.ns, render.ICCDeployment))
		s := secret(t, op.ns, secrets.PullSecret)
		return s == nil && !mounted && ann == "", fmt.Sprintf("copy there %v, mounted %v, digest %q", s != nil, mounted, ann)
	})

	for _, e := range provisioningEvents(t) {
		if e.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			continue
		}
		for _, auth := range []string{testAuth, testAuthRotated} {
			if strings.Contains(e.Note, authToken(auth)) || strings.Contains(e.Note, base64.StdEncoding.EncodeToString([]byte(auth))) {
				t.Errorf("event %s shows the pull secret: %s", e.Reason, e.Note)
			}
		}
	}
	if m := messages(co(t)); strings.Contains(m, authToken(testAuth)) || strings.Contains(m, authToken(testAuthRotated)) {
		t.Errorf("the ClusterOperator shows the pull secret: %s", m)
	}
}

// watchWake bounds how long the operator takes to act on a change of the cluster's pull secret:
// inside its 30-second look at a syncing stack and the resync of a complete one, so only the
// watch can have woken it, with room for a machine the fault campaign loads (30 s waits have
// timed out beside it).
const watchWake = 25 * time.Second

// waitPullSecretFollows waits until the copy holds auth as base64 text and the controller mounts
// it with a digest other than before; it returns the digest.
func waitPullSecretFollows(t *testing.T, ns, auth, before string) string {
	t.Helper()
	var ann string
	poll.Within(t, watchWake, "the copy and the controller's pod template to follow the cluster's pull secret", func() (bool, string) {
		var mounted bool
		mounted, ann = pullSecretMount(t, deployment(t, ns, render.ICCDeployment))
		s := secret(t, ns, secrets.PullSecret)
		if s == nil {
			return false, "no copy"
		}
		decoded, err := base64.StdEncoding.DecodeString(string(s.Data[secrets.KeyDockerConfigJSON]))
		current := err == nil && string(decoded) == auth
		return current && mounted && ann != "" && ann != before,
			fmt.Sprintf("copy current %v (keys %d), mounted %v, digest %q (before %q)", current, len(s.Data), mounted, ann, before)
	})
	return ann
}

// pullSecretMount reports whether the controller's container mounts the copy, read-only, at the
// file it reads, and the digest on its pod template.
func pullSecretMount(t *testing.T, d *appsv1.Deployment) (bool, string) {
	t.Helper()
	if d == nil {
		t.Fatal("no image-customization-controller Deployment")
	}
	volumes := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secrets.PullSecret {
			volumes[v.Name] = true
		}
	}
	mounted := false
	for _, vm := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if volumes[vm.Name] && vm.MountPath == "/run/secrets/pull-secret" && vm.SubPath != "" && vm.ReadOnly {
			mounted = true
		}
	}
	return mounted, d.Spec.Template.Annotations[render.PullSecretFingerprintAnnotation]
}

// iccStackComplete plays the deployment controller for a stack with the image-customization-controller
// (the metal3 pod's address known) until the ClusterOperator says DeployComplete.
func iccStackComplete(t *testing.T, ns string) {
	t.Helper()
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: render.StateService + "-x1", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: render.StateService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.168.111.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	if err := env.Client.Create(context.Background(), slice); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	poll.Until(t, "the stack complete", func() (bool, string) {
		for _, name := range []string{render.Metal3Deployment, render.BMODeployment, render.ICCDeployment} {
			if d := deployment(t, ns, name); d != nil && !available(d) {
				markAvailable(t, ns, name)
			}
		}
		got := conditions(co(t))
		return got["Available"] == "True/DeployComplete" && got["Progressing"] == "False/AsExpected", fmt.Sprint(got, messages(co(t)))
	})
}

// authToken is the credential in a test auth file.
func authToken(auth string) string {
	_, rest, _ := strings.Cut(auth, `"auth":"`)
	token, _, _ := strings.Cut(rest, `"`)
	return token
}
