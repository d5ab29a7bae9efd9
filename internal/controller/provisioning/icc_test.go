package provisioning

import (
	"context"
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
