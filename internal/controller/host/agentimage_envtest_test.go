package host

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/preprovisioningimage"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// The host controller with --build-preprov-image against the real API server. Some tests run the
// built-in image controller in the same manager (as the binary does); others play the image
// builder by hand, writing the image's status, to hold the host in each waiting situation.

const (
	testVMediaBMC   = "redfish-virtualmedia://192.0.2.20/redfish/v1/Systems/1"
	testISOURL      = "http://images.example/agent.iso"
	testAarch64ISO  = "http://images.example/agent-aarch64.iso"
	testInitrdURL   = "http://images.example/agent.initrd"
	testKernelURL   = "http://images.example/agent.kernel"
	testNetworkData = "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n"
)

// testImages are the built-in image controller's images in these tests.
var testImages = preprovisioningimage.ImagesFromEnv([]string{
	"DEPLOY_ISO_URL=" + testISOURL, "DEPLOY_RAMDISK_URL=" + testInitrdURL, "DEPLOY_KERNEL_URL=" + testKernelURL,
	"DEPLOY_ISO_URL_AARCH64=" + testAarch64ISO,
})

// startImageOperator starts the operator with --build-preprov-image and, with builtIn, the
// built-in image controller alongside; without it, the test builds the images.
func startImageOperator(t *testing.T, ns string, fix *fixture.Fixture, builtIn bool, tune ...func(*Config)) *operator {
	t.Helper()
	var alongside func(ctrl.Manager) error
	if builtIn {
		alongside = builtInImageController
	}
	return startManager(t, env.Config, ns, fix, alongside, append([]func(*Config){withImages}, tune...)...)
}

func withImages(c *Config) { c.PreprovisioningImages = true }

// builtInImageController adds the built-in image controller to a manager, as the binary does.
func builtInImageController(mgr ctrl.Manager) error {
	r := &preprovisioningimage.Reconciler{Images: testImages, Config: preprovisioningimage.DefaultConfig(), SkipNameValidation: true}
	return r.SetupWithManager(context.Background(), mgr)
}

func imageFixture() *fixture.Fixture { return fixture.New(fixture.Config{PreprovisioningImages: true}) }

func getImage(t *testing.T, ns, name string) *metal3.PreprovisioningImage {
	t.Helper()
	ppi := &metal3.PreprovisioningImage{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, ppi); err != nil {
		t.Fatalf("getting PreprovisioningImage %s: %v", name, err)
	}
	return ppi
}

func waitImage(t *testing.T, ns, name, what string, cond func(*metal3.PreprovisioningImage) bool) *metal3.PreprovisioningImage {
	t.Helper()
	var ppi *metal3.PreprovisioningImage
	poll.Until(t, "PreprovisioningImage "+name+": "+what, func() (bool, string) {
		ppi = &metal3.PreprovisioningImage{}
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, ppi)
		if err != nil {
			return false, err.Error()
		}
		return cond(ppi), fmt.Sprintf("spec %+v labels %v status %+v", ppi.Spec, ppi.Labels, ppi.Status)
	})
	return ppi
}

func waitImageGone(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, "PreprovisioningImage "+name+" to be deleted", func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &metal3.PreprovisioningImage{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// buildImage plays the image builder: it writes the image's status (the image as the builder
// leaves it), retrying conflicts.
func buildImage(t *testing.T, ns, name string, change func(p *metal3.PreprovisioningImage)) {
	t.Helper()
	ctx := context.Background()
	for range 20 {
		ppi := getImage(t, ns, name)
		change(ppi)
		err := env.Client.Status().Update(ctx, ppi)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("writing the status of PreprovisioningImage %s: %v", name, err)
		}
	}
	t.Fatalf("writing the status of PreprovisioningImage %s: too many conflicts", name)
}

// built sets a successful build: url, format, architecture and network data, Ready for the
// image's generation.
func built(url string, format metal3.ImageFormat, arch, netName, netVersion string) func(p *metal3.PreprovisioningImage) {
	return func(p *metal3.PreprovisioningImage) {
		p.Status.ImageURL, p.Status.Format, p.Status.Architecture = url, format, arch
		p.Status.KernelURL, p.Status.ExtraKernelParams = "", ""
		if format == metal3.ImageFormatInitRD {
			p.Status.KernelURL, p.Status.ExtraKernelParams = testKernelURL, "ip=dhcp6"
		}
		p.Status.NetworkData = metal3.SecretStatus{Name: netName, Version: netVersion}
		p.Status.Conditions = []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: metal3.ImageSuccessReason, Message: "Generated image", ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()},
			{Type: "Error", Status: metav1.ConditionFalse, Reason: metal3.ImageSuccessReason, ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()},
		}
	}
}

// failedBuild is what an image builder writes when it cannot build the image: no URL, Ready
// False and Error True with the builder's message.
func failedBuild(message string) func(p *metal3.PreprovisioningImage) {
	return func(p *metal3.PreprovisioningImage) {
		p.Status.ImageURL = ""
		p.Status.Conditions = []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: metal3.ImageBuildInvalidReason, ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()},
			{Type: "Error", Status: metav1.ConditionTrue, Reason: metal3.ImageBuildInvalidReason, ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now(),
				Message: message},
		}
	}
}

// waitProgressing waits for the host's Progressing message to contain want, and returns the host.
func waitProgressing(t *testing.T, ns, name, want string) *metal3.BareMetalHost {
	t.Helper()
	var h *metal3.BareMetalHost
	poll.Until(t, fmt.Sprintf("host %s: Progressing message %s", name, want), func() (bool, string) {
		h = getHost(t, ns, name)
		c := condition(h, metal3.ProgressingCondition)
		if c == nil {
			return false, describe(h)
		}
		return strings.Contains(c.Message, want), describe(h) + ", Progressing: " + c.Message
	})
	return h
}

// waitingSinceOf is the time in a Progressing message of an image wait.
func waitingSinceOf(t *testing.T, h *metal3.BareMetalHost) string {
	t.Helper()
	c := condition(h, metal3.ProgressingCondition)
	i := strings.LastIndex(c.Message, " since ")
	if c.Reason != reasonWaitingForImage || i < 0 || c.Status != metav1.ConditionTrue {
		t.Fatalf("Progressing is not an image wait: %+v", c)
	}
	return c.Message[i+len(" since "):]
}

// TestImageWaitingStates plays the image builder by hand and follows one host through every
// situation its image can be in: each wait is said in the Progressing message (reason
// WaitingForPreprovisioningImage, since the time the wait started), a build error is a
// registration error with the builder's message and the host recovers from it, the ready image
// goes to the provisioner, the image is deleted once the host is provisioned and made again for
// deprovisioning, which waits for it too, and deleting the host deletes it.
func TestImageWaitingStates(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	op := startImageOperator(t, ns, fix, false)
	create(t, builder.DataSecret(ns, "net-h", "nmstate", testNetworkData))
	h := newHost(ns, "h").Build() // redfish (iPXE): the BMC boots an initrd only
	h.Spec.PreprovisioningNetworkDataName = "net-h"
	h.Spec.Architecture = "x86_64" // what the fixture inspects, whatever this machine is
	h.Labels = map[string]string{"infraenvs.agent-install.openshift.io": "env1"}
	createHost(t, h)

	// Registered, and waiting in registering for the image it created.
	building := `Waiting for the image builder to build PreprovisioningImage "h" (initrd, x86_64, network data Secret "net-h") since `
	h = waitProgressing(t, ns, "h", building)
	since := waitingSinceOf(t, h)
	if h.Status.Provisioning.State != metal3.StateRegistering || h.Status.Provisioning.ID == "" || h.Status.OperationalStatus != metal3.OperationalStatusOK {
		t.Fatalf("waiting host: %s, node %q", describe(h), h.Status.Provisioning.ID)
	}
	ppi := getImage(t, ns, "h")
	want := metal3.PreprovisioningImageSpec{NetworkDataName: "net-h", Architecture: "x86_64", AcceptFormats: []metal3.ImageFormat{metal3.ImageFormatInitRD}}
	if owner := metav1.GetControllerOf(ppi); owner == nil || owner.UID != h.UID || owner.Kind != "BareMetalHost" ||
		ppi.Labels["infraenvs.agent-install.openshift.io"] != "env1" || fmt.Sprint(ppi.Spec) != fmt.Sprint(want) {
		t.Fatalf("image: owner %+v labels %v spec %+v", owner, ppi.Labels, ppi.Spec)
	}
	version := getSecret(t, ns, "net-h").ResourceVersion

	steps := []struct {
		name    string
		build   func(p *metal3.PreprovisioningImage)
		waiting string
	}{
		{"built for another architecture", built("http://builder/h.initrd", metal3.ImageFormatInitRD, "aarch64", "net-h", version),
			`the image builder to rebuild PreprovisioningImage "h" for architecture x86_64 (it is built for "aarch64")`},
		{"built as an ISO the BMC cannot boot", built("http://builder/h.iso", metal3.ImageFormatISO, "x86_64", "net-h", version),
			`the image builder to rebuild PreprovisioningImage "h" as initrd (it is built as "iso")`},
		{"built with other network data", built("http://builder/h.initrd", metal3.ImageFormatInitRD, "x86_64", "net-old", version),
			`the image builder to rebuild PreprovisioningImage "h" with network data Secret "net-h" (it is built with "net-old")`},
		{"built from an old version of the Secret", built("http://builder/h.initrd", metal3.ImageFormatInitRD, "x86_64", "net-h", "1"),
			`the image builder to rebuild PreprovisioningImage "h" with the current network data (Secret "net-h" is at version ` + version + `, the image has version 1)`},
		{"Ready for an older generation", func(p *metal3.PreprovisioningImage) {
			built("http://builder/h.initrd", metal3.ImageFormatInitRD, "x86_64", "net-h", version)(p)
			p.Status.Conditions[0].ObservedGeneration = 0
		}, `the image builder to build PreprovisioningImage "h" (initrd, x86_64, network data Secret "net-h")`},
		{"no URL", func(p *metal3.PreprovisioningImage) {
			built("", metal3.ImageFormatInitRD, "x86_64", "net-h", version)(p)
		}, `the image builder to publish the URL of PreprovisioningImage "h"`},
	}
	for _, step := range steps {
		buildImage(t, ns, "h", step.build)
		h = waitProgressing(t, ns, "h", "Waiting for "+step.waiting+" since ")
		if got := waitingSinceOf(t, h); got != since || h.Status.Provisioning.State != metal3.StateRegistering {
			t.Fatalf("%s: waiting since %s (first %s) in %s", step.name, got, since, describe(h))
		}
	}
	if n := fix.Count(ns, "h", fixture.OpInspect); n != 0 {
		t.Fatalf("inspected %d times while the image was not ready", n)
	}

	// A build error is a registration error with the builder's message (on one line).
	buildImage(t, ns, "h", failedBuild("nmstatectl: error:\n  interfaces[0]: unknown type \"wifi\""))
	wantErr := `PreprovisioningImage "h" could not be built (ImageBuildInvalid): nmstatectl: error: interfaces[0]: unknown type "wifi"`
	h = waitHost(t, ns, "h", "the image's error", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorMessage == wantErr })
	if h.Status.ErrorType != metal3.RegistrationError || h.Status.OperationalStatus != metal3.OperationalStatusError || h.Status.ErrorCount != 1 {
		t.Fatalf("image error on the host: %s", describe(h))
	}
	if c := condition(h, metal3.ManageableCondition); c.Reason != metal3.RegistrationFailedReason || c.Message != wantErr {
		t.Fatalf("Manageable: %+v", c)
	}
	waitEvent(t, ns, "h", "RegistrationError")
	op.waitSeen(t, ns, "h", h.ResourceVersion, 2) // looked at again: the same error is not recorded again
	if h2 := getHost(t, ns, "h"); h2.Status.ErrorCount != 1 || h2.ResourceVersion != h.ResourceVersion {
		t.Fatalf("the unchanged error was written again: %s", describe(h2))
	}

	// Fixed: the host goes on, with the image in the provisioner's hands, to provisioned.
	buildImage(t, ns, "h", built("http://builder/h-1.initrd", metal3.ImageFormatInitRD, "x86_64", "net-h", version))
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.ErrorType != "" || h.Status.ErrorCount != 0 {
		t.Fatalf("recovered host keeps the error: %s", describe(h))
	}
	node, _ := fix.Node(ns, "h")
	if node.AgentImage.ImageURL != "http://builder/h-1.initrd" || node.AgentImage.KernelURL != testKernelURL ||
		node.AgentImage.ExtraKernelParams != "ip=dhcp6" || node.AgentImage.Format != metal3.ImageFormatInitRD {
		t.Fatalf("the provisioner booted %+v", node.AgentImage)
	}
	waitImageGone(t, ns, "h") // provisioned: the agent is done (seed 001)

	// Deprovisioning boots the agent again: the image is made again and waited for.
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	h = waitProgressing(t, ns, "h", `Waiting for the image builder to build PreprovisioningImage "h" (`)
	if h.Status.Provisioning.State != metal3.StateDeprovisioning || fix.Count(ns, "h", fixture.OpDeprovision) != 0 {
		t.Fatalf("deprovisioning without its image: %s, %d deprovisions", describe(h), fix.Count(ns, "h", fixture.OpDeprovision))
	}
	buildImage(t, ns, "h", built("http://builder/h-2.initrd", metal3.ImageFormatInitRD, "x86_64", "net-h", version))
	waitState(t, ns, "h", metal3.StateAvailable)
	if node, _ = fix.Node(ns, "h"); node.AgentImage.ImageURL != "http://builder/h-2.initrd" || fix.Count(ns, "h", fixture.OpDeprovision) != 1 {
		t.Fatalf("deprovisioned %d times, with %+v", fix.Count(ns, "h", fixture.OpDeprovision), node.AgentImage)
	}
	getImage(t, ns, "h") // available keeps it, ready for the next provisioning

	// Deleting the host deletes its image (there is no garbage collector in envtest: the host did).
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	waitImageGone(t, ns, "h")
}

// TestImageWithBuiltInController: a virtual-media host goes to provisioned on the built-in image
// controller's ISO, its image is deleted then, and deleting the host leaves nothing behind.
func TestImageWithBuiltInController(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	startImageOperator(t, ns, fix, true)
	create(t, builder.DataSecret(ns, "net-v", "nmstate", testNetworkData))
	h := newHost(ns, "v").WithBMC(testVMediaBMC, "bmc-v").Build()
	h.Spec.PreprovisioningNetworkDataName = "net-v"
	createHost(t, h)
	waitState(t, ns, "v", metal3.StateProvisioned)
	node, _ := fix.Node(ns, "v")
	if node.AgentImage.ImageURL != testISOURL || node.AgentImage.Format != metal3.ImageFormatISO {
		t.Fatalf("virtual media booted %+v, want the ISO", node.AgentImage)
	}
	waitTransition(t, ns, "v", metal3.StateInspecting)
	waitImageGone(t, ns, "v")
	deleteHost(t, ns, "v")
	waitGone(t, ns, "v")
	poll.Until(t, "no image", func() (bool, string) {
		var list metal3.PreprovisioningImageList
		if err := env.Client.List(context.Background(), &list); err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			if p.Namespace == ns {
				return false, p.Name
			}
		}
		return true, ""
	})
}

// TestImageSpecFollowsTheHost: the image's labels and spec follow the host's labels, network data
// Secret and architecture, and the built-in controller rebuilds it; a re-inspection then boots
// the image of the new architecture.
func TestImageSpecFollowsTheHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	startImageOperator(t, ns, fix, true)
	create(t, builder.DataSecret(ns, "net-a", "nmstate", testNetworkData), builder.DataSecret(ns, "net-b", "nmstate", testNetworkData))
	h := builder.BareMetalHost(ns, "s").WithBMC(testVMediaBMC, "bmc-s").WithBootMACAddress("52:54:00:00:00:02").Build()
	h.Spec.PreprovisioningNetworkDataName = "net-a"
	createHost(t, h)
	h = waitState(t, ns, "s", metal3.StateAvailable)
	ppi := waitImage(t, ns, "s", "built with net-a", func(p *metal3.PreprovisioningImage) bool {
		return p.Status.NetworkData.Name == "net-a" && p.Status.ImageURL == testISOURL
	})
	if ppi.Spec.Architecture != "x86_64" || ppi.Spec.NetworkDataName != "net-a" {
		t.Fatalf("spec %+v", ppi.Spec)
	}

	update(t, h, func(h *metal3.BareMetalHost) { h.Labels = map[string]string{"rack": "r12"} })
	waitImage(t, ns, "s", "label rack=r12", func(p *metal3.PreprovisioningImage) bool { return p.Labels["rack"] == "r12" })

	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.PreprovisioningNetworkDataName = "net-b" })
	waitImage(t, ns, "s", "rebuilt with net-b", func(p *metal3.PreprovisioningImage) bool {
		return p.Spec.NetworkDataName == "net-b" && p.Status.NetworkData.Name == "net-b" &&
			p.Status.NetworkData.Version == getSecret(t, ns, "net-b").ResourceVersion
	})
	// A new version of the Secret reaches the image's status.
	update(t, getSecret(t, ns, "net-b"), func(s *corev1.Secret) { s.Data["nmstate"] = []byte("interfaces: []\n") })
	waitImage(t, ns, "s", "the Secret's new version", func(p *metal3.PreprovisioningImage) bool {
		return p.Status.NetworkData.Version == getSecret(t, ns, "net-b").ResourceVersion
	})

	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Architecture = "aarch64" })
	waitImage(t, ns, "s", "rebuilt for aarch64", func(p *metal3.PreprovisioningImage) bool {
		return p.Spec.Architecture == "aarch64" && p.Status.Architecture == "aarch64" && p.Status.ImageURL == testAarch64ISO
	})
	annotate(t, ns, "s", metal3.InspectAnnotationPrefix, "")
	poll.Until(t, "a re-inspection on the aarch64 image", func() (bool, string) {
		node, _ := fix.Node(ns, "s")
		return fix.Count(ns, "s", fixture.OpInspect) == 2 && node.AgentImage.ImageURL == testAarch64ISO, fmt.Sprintf("%+v", node.AgentImage)
	})
	waitState(t, ns, "s", metal3.StateAvailable)
}

// TestStartAssistedInstall: a host with customDeploy start_assisted_install and no image (the
// converged ZTP flow, seed 001) is inspected, prepared, and deployed with that step, on its agent
// image, which is deleted once the host is provisioned.
func TestStartAssistedInstall(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	startImageOperator(t, ns, fix, true)
	h := builder.BareMetalHost(ns, "z").WithBMC(testVMediaBMC, "bmc-z").WithBootMACAddress("52:54:00:00:00:03").
		WithCustomDeploy("start_assisted_install").Build()
	h.Labels = map[string]string{"infraenvs.agent-install.openshift.io": "myenv"}
	createHost(t, h)
	h = waitState(t, ns, "z", metal3.StateProvisioned)
	for _, s := range []metal3.ProvisioningState{metal3.StateInspecting, metal3.StatePreparing, metal3.StateProvisioning} {
		waitTransition(t, ns, "z", s)
	}
	node, _ := fix.Node(ns, "z")
	if node.Image != "custom-deploy:start_assisted_install" || fix.Count(ns, "z", fixture.OpInspect) != 1 || node.AgentImage.ImageURL != testISOURL {
		t.Fatalf("deployed %q after %d inspections, agent %+v", node.Image, fix.Count(ns, "z", fixture.OpInspect), node.AgentImage)
	}
	if h.Status.Provisioning.CustomDeploy == nil || h.Status.Provisioning.CustomDeploy.Method != "start_assisted_install" {
		t.Fatalf("status.provisioning.customDeploy %+v", h.Status.Provisioning.CustomDeploy)
	}
	waitImageGone(t, ns, "z")
}

// TestImageErrorWhileDeleting: a host being deleted whose image cannot be built does not wait
// for a fix: cleaning cannot run without the agent, so it powers off and goes.
func TestImageErrorWhileDeleting(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	startImageOperator(t, ns, fix, false)
	d := newHost(ns, "d").Build()
	d.Spec.Architecture = "x86_64"
	createHost(t, d)
	waitProgressing(t, ns, "d", `Waiting for the image builder to build PreprovisioningImage "d" (`)
	buildImage(t, ns, "d", built("http://builder/d.initrd", metal3.ImageFormatInitRD, "x86_64", "", ""))
	waitState(t, ns, "d", metal3.StateProvisioned)
	waitImageGone(t, ns, "d")
	deleteHost(t, ns, "d")
	waitHost(t, ns, "d", "deprovisioning, waiting for the image", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return h.Status.Provisioning.State == metal3.StateDeprovisioning && c != nil && c.Reason == reasonWaitingForImage
	})
	buildImage(t, ns, "d", func(p *metal3.PreprovisioningImage) {
		p.Status.Conditions = []metav1.Condition{{Type: "Error", Status: metav1.ConditionTrue, Reason: metal3.ImageConfigurationErrorReason,
			Message: "spec.architecture: not supported", ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()}}
	})
	waitGone(t, ns, "d")
	if n := fix.Count(ns, "d", fixture.OpDeprovision); n != 0 {
		t.Fatalf("deprovisioned %d times without an image", n)
	}
	waitImageGone(t, ns, "d")
}

// TestImageHeldByMetal3FinalizerGoes: an image carrying metal3's host finalizer (put there by a
// metal3 baremetal-operator that ran before this one) is released when the host is done with
// it, as metal3 does: it goes, instead of staying Terminating for ever. A host deleted meanwhile
// then gets a new image for its cleaning.
func TestImageHeldByMetal3FinalizerGoes(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	startImageOperator(t, ns, fix, false)
	h := newHost(ns, "m").Build()
	h.Spec.Architecture = "x86_64"
	createHost(t, h)
	waitProgressing(t, ns, "m", `Waiting for the image builder to build PreprovisioningImage "m" (`)
	ppi := getImage(t, ns, "m")
	ppi.Finalizers = append(ppi.Finalizers, metal3.HostPreprovisioningImageFinalizer)
	if err := env.Client.Update(context.Background(), ppi); err != nil {
		t.Fatal(err)
	}
	buildImage(t, ns, "m", built("http://builder/m.initrd", metal3.ImageFormatInitRD, "x86_64", "", ""))
	waitState(t, ns, "m", metal3.StateProvisioned)
	waitImageGone(t, ns, "m")

	deleteHost(t, ns, "m")
	waitImage(t, ns, "m", "made again for the cleaning", func(p *metal3.PreprovisioningImage) bool { return p.DeletionTimestamp.IsZero() })
	buildImage(t, ns, "m", built("http://builder/m.initrd", metal3.ImageFormatInitRD, "x86_64", "", ""))
	waitGone(t, ns, "m")
	if n := fix.Count(ns, "m", fixture.OpDeprovision); n != 1 {
		t.Fatalf("deprovisioned %d times, want 1", n)
	}
}
