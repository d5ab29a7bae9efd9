package imagecustomization

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// A PreprovisioningImage with static network data gets an ISO with the host's keyfile: URL,
// format, architecture, network data version, Ready and Error as metal3 sets them, the finalizer,
// the checksum annotation, a labelled Secret, an event.
func TestBuildsImage(t *testing.T) {
	ns := env.Namespace(t)
	c := startICC(t, ns)
	sec := networkSecret(ns, "host-0-nd", staticNMState)
	ppi := newPPI(ns, "host-0")
	ppi.Spec.NetworkDataName = sec.Name
	create(t, sec, ppi)
	p := waitReady(t, ns, "host-0")
	must(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(sec), sec))
	ready, errc := cond(p, readyType), cond(p, errorType)
	if ready.Reason != metal3.ImageSuccessReason || ready.Message != "Generated image" || errc.Status != metav1.ConditionFalse {
		t.Errorf("conditions %+v %+v", ready, errc)
	}
	if p.Status.Format != metal3.ImageFormatISO || p.Status.Architecture != ppi.Spec.Architecture ||
		p.Status.NetworkData != (metal3.SecretStatus{Name: sec.Name, Version: sec.ResourceVersion}) {
		t.Errorf("status %+v (secret version %s)", p.Status, sec.ResourceVersion)
	}
	if !strings.HasPrefix(p.Status.ImageURL, c.srv.URL+"/") || strings.Contains(p.Status.ImageURL, "host-0") || !strings.HasSuffix(p.Status.ImageURL, ".iso") {
		t.Errorf("URL %s: must be ours and not derived from the name", p.Status.ImageURL)
	}
	if !slices.Contains(p.Finalizers, metal3.PreprovisioningImageFinalizer) {
		t.Errorf("finalizers %v", p.Finalizers)
	}
	if sec.Labels[metal3.EnvironmentLabel] != metal3.EnvironmentLabelValue {
		t.Errorf("the Secret was not labelled for the cache: %v", sec.Labels)
	}
	code, image := download(t, p.Status.ImageURL)
	if code != 200 {
		t.Fatalf("GET %s: %d", p.Status.ImageURL, code)
	}
	config := ignitionOf(t, image)
	for _, want := range []string{"/etc/NetworkManager/system-connections/eno1.nmconnection", "/etc/ironic-python-agent.conf"} {
		if !strings.Contains(config, want) {
			t.Errorf("Ignition lacks %s", want)
		}
	}
	name := p.Status.ImageURL[strings.LastIndex(p.Status.ImageURL, "/")+1:]
	if got := p.Annotations[metal3.ImageSHA256Annotation]; got != sha256hex(image)+"  "+name {
		t.Errorf("checksum annotation %q, image %s", got, sha256hex(image))
	}
	waitEvent(t, ns, "host-0", EventImageBuilt)
	if code, _ := download(t, c.srv.URL+"/"); code != http.StatusNotFound {
		t.Errorf("listing: %d", code)
	}
}

func TestInitrdImage(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	create(t, newPPI(ns, "pxe", metal3.ImageFormatInitRD))
	p := waitReady(t, ns, "pxe")
	if p.Status.Format != metal3.ImageFormatInitRD || p.Status.KernelURL == "" || !strings.Contains(p.Status.ExtraKernelParams, "coreos.live.rootfs_url=") {
		t.Errorf("status %+v", p.Status)
	}
	if code, kernel := download(t, p.Status.KernelURL); code != 200 || !strings.HasPrefix(string(kernel), "METALFORGE-AGENT-KERNEL") {
		t.Errorf("kernel: %d", code)
	}
}

// The 60 s grace period (shortened): nothing is built before it has passed since creation, and
// the Ready message says until when.
func TestGracePeriod(t *testing.T) {
	ns := env.Namespace(t)
	const grace = 2 * time.Second
	startICC(t, ns, func(c *Config) { c.GracePeriod = grace })
	create(t, newPPI(ns, "graceful"))
	p := waitPPI(t, ns, "graceful", "waiting for the grace period", func(p *metal3.PreprovisioningImage) bool {
		return strings.HasPrefix(cond(p, readyType).Message, "Waiting 2s after creation before building the image (until ")
	})
	if p.Status.ImageURL != "" || cond(p, readyType).Status != metav1.ConditionFalse {
		t.Errorf("built during the grace period: %s", describe(p))
	}
	p = waitReady(t, ns, "graceful")
	readyAt := cond(p, readyType).LastTransitionTime.Time
	if readyAt.Before(p.CreationTimestamp.Add(grace)) {
		t.Errorf("ready at %v, created %v: less than %v", readyAt, p.CreationTimestamp, grace)
	}
}

// A host linked to an InfraEnv waits for the ignition-override-uri annotation; then the override
// is merged into the agent's config.
func TestInfraEnvWaitsForOverride(t *testing.T) {
	ns := env.Namespace(t)
	c := startICC(t, ns)
	override := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/assisted/agent-installer.env","contents":{"source":"data:,INFRA_ENV_ID=env1"}}]}}`))
	}))
	defer override.Close()
	ppi := newPPI(ns, "ztp-0")
	ppi.Labels = map[string]string{metal3.InfraEnvLabel: "env1"}
	create(t, ppi)
	p := waitPPI(t, ns, "ztp-0", "waiting for the override", func(p *metal3.PreprovisioningImage) bool {
		return cond(p, readyType).Message == "Waiting for the baremetal.openshift.io/ignition-override-uri annotation (InfraEnv env1)"
	})
	c.waitSeen(t, "ztp-0", p.ResourceVersion)
	if p = get(t, ns, "ztp-0"); p.Status.ImageURL != "" {
		t.Fatalf("built without the override: %s", describe(p))
	}
	update(t, p, func() {
		p.Annotations = map[string]string{metal3.IgnitionOverrideURIAnnotation: override.URL + "/agent.ign?token=secret"}
	})
	p = waitReady(t, ns, "ztp-0")
	_, image := download(t, p.Status.ImageURL)
	config := ignitionOf(t, image)
	if !strings.Contains(config, "/etc/assisted/agent-installer.env") || !strings.Contains(config, "/etc/ironic-python-agent.conf") {
		t.Errorf("merged config lacks the override or the agent's own files: %.400s", config)
	}
}

// Changing the override of a Ready image clears Ready first (the old URL is still served), then
// publishes the new image under a new URL.
func TestOverrideChangeRebuilds(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	content := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/one","contents":{"source":"data:,1"}}]}}`
	override := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(content)) }))
	defer override.Close()
	h := watchPPIs(t, ns)
	create(t, newPPI(ns, "host-0"))
	first := waitReady(t, ns, "host-0")
	update(t, first, func() {
		first.Annotations = map[string]string{metal3.IgnitionOverrideURIAnnotation: override.URL + "/a.ign"}
	})
	p := waitPPI(t, ns, "host-0", "rebuilt", func(p *metal3.PreprovisioningImage) bool {
		return isReady(p) && p.Status.ImageURL != first.Status.ImageURL
	})
	sawUnready := false
	for _, v := range h.of("host-0") {
		r := cond(v, readyType)
		if r.Status == metav1.ConditionFalse && r.Message == msgConfigChanged && v.Status.ImageURL == first.Status.ImageURL {
			sawUnready = true
		}
	}
	if !sawUnready {
		t.Error("Ready was not cleared before the new URL was published")
	}
	if code, _ := download(t, first.Status.ImageURL); code != http.StatusNotFound {
		t.Errorf("the old image is still served: %d", code)
	}
	if _, image := download(t, p.Status.ImageURL); !strings.Contains(ignitionOf(t, image), "/etc/one") {
		t.Error("the new image lacks the override")
	}
}

// Invalid nmstate: ImageBuildInvalid with a message naming the field, a Warning event, and the
// image recovers once the Secret is fixed.
func TestInvalidNMState(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	sec := networkSecret(ns, "nd", strings.Replace(staticNMState, "192.0.2.10", "192.0.2.300", 1))
	ppi := newPPI(ns, "bad")
	ppi.Spec.NetworkDataName = "nd"
	create(t, sec, ppi)
	p := waitPPI(t, ns, "bad", "ImageBuildInvalid", func(p *metal3.PreprovisioningImage) bool {
		return cond(p, errorType).Status == metav1.ConditionTrue
	})
	e := cond(p, errorType)
	if e.Reason != metal3.ImageBuildInvalidReason || !strings.Contains(e.Message, "interfaces[0].ipv4.address[0].ip") || !strings.Contains(e.Message, "192.0.2.300") ||
		cond(p, readyType).Reason != metal3.ImageBuildInvalidReason || p.Status.ImageURL != "" {
		t.Errorf("status: %s", describe(p))
	}
	waitEvent(t, ns, "bad", EventBuildInvalid)
	update(t, sec, func() { sec.Data["nmstate"] = []byte(staticNMState) })
	p = waitReady(t, ns, "bad")
	if cond(p, errorType).Status != metav1.ConditionFalse {
		t.Errorf("error not cleared: %s", describe(p))
	}
}

// A Ready image that fails (its network data Secret deleted, its nmstate made invalid, its
// architecture one without a base image) is no longer served: its URL would otherwise keep
// handing out the old network configuration. Fixing the input serves it again, under its old URL.
func TestFailedImageNotServed(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	tests := map[string]struct {
		reason string
		fail   func(p *metal3.PreprovisioningImage, sec *corev1.Secret)
	}{
		"network data deleted": {metal3.ImageMissingNetworkDataReason, func(_ *metal3.PreprovisioningImage, sec *corev1.Secret) {
			must(t, env.Client.Delete(context.Background(), sec))
		}},
		"nmstate invalid": {metal3.ImageBuildInvalidReason, func(_ *metal3.PreprovisioningImage, sec *corev1.Secret) {
			update(t, sec, func() { sec.Data["nmstate"] = []byte(strings.Replace(staticNMState, "192.0.2.10", "192.0.2.300", 1)) })
		}},
		"architecture unsupported": {metal3.ImageConfigurationErrorReason, func(p *metal3.PreprovisioningImage, _ *corev1.Secret) {
			update(t, p, func() { p.Spec.Architecture = "s390x" })
		}},
	}
	ready := map[string]*metal3.PreprovisioningImage{}
	for name := range tests {
		host := strings.ReplaceAll(name, " ", "-")
		ppi := newPPI(ns, host)
		ppi.Spec.NetworkDataName = host + "-nd"
		create(t, networkSecret(ns, ppi.Spec.NetworkDataName, staticNMState), ppi)
		ready[name] = waitReady(t, ns, host)
	}
	for name, tc := range tests {
		p := ready[name]
		tc.fail(p, networkSecret(ns, p.Spec.NetworkDataName, ""))
		waitPPI(t, ns, p.Name, tc.reason, func(p *metal3.PreprovisioningImage) bool {
			return cond(p, errorType).Reason == tc.reason && p.Status.ImageURL == ""
		})
		poll.Until(t, name+": the old image no longer served", func() (bool, string) {
			code, _ := download(t, ready[name].Status.ImageURL)
			return code == http.StatusNotFound, "HTTP " + strconv.Itoa(code)
		})
	}
	old := ready["network data deleted"]
	create(t, networkSecret(ns, old.Spec.NetworkDataName, staticNMState))
	if p := waitReady(t, ns, old.Name); p.Status.ImageURL != old.Status.ImageURL {
		t.Errorf("the same inputs built %s, not the old URL %s", p.Status.ImageURL, old.Status.ImageURL)
	}
	if code, _ := download(t, old.Status.ImageURL); code != http.StatusOK {
		t.Errorf("the rebuilt image answers HTTP %d", code)
	}
}

// A missing Secret is MissingNetworkData, retried with growing delay; the image recovers once the
// Secret exists (even unlabelled: it is read through the API server and labelled).
func TestMissingSecret(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	ppi := newPPI(ns, "waiting")
	ppi.Spec.NetworkDataName = "later"
	create(t, ppi)
	p := waitPPI(t, ns, "waiting", "MissingNetworkData", func(p *metal3.PreprovisioningImage) bool {
		return cond(p, errorType).Reason == metal3.ImageMissingNetworkDataReason
	})
	if m := cond(p, errorType).Message; m != `spec.networkDataName: secret "later" not found` {
		t.Errorf("message %q", m)
	}
	create(t, networkSecret(ns, "later", staticNMState))
	p = waitReady(t, ns, "waiting")
	if p.Status.NetworkData.Name != "later" {
		t.Errorf("network data %+v", p.Status.NetworkData)
	}
}

// Losing the image cache (a restart with an empty work directory) clears Ready on every image the
// controller built, then rebuilds each under a new URL; the old URLs are gone.
func TestCacheLoss(t *testing.T) {
	ns := env.Namespace(t)
	c := startICC(t, ns)
	h := watchPPIs(t, ns)
	names := []string{"host-0", "host-1", "host-2"}
	old := map[string]string{}
	for _, n := range names {
		create(t, newPPI(ns, n))
	}
	for _, n := range names {
		old[n] = waitReady(t, ns, n).Status.ImageURL
	}
	c.restart(false)
	for _, n := range names {
		p := get(t, ns, n)
		c.waitSeen(t, n, p.ResourceVersion)
		if p = get(t, ns, n); !isReady(p) || p.Status.ImageURL != old[n] {
			t.Errorf("a restart with the same work directory changed %s: %s", n, describe(p))
		}
		if code, _ := download(t, old[n]); code != 200 {
			t.Errorf("%s not served after a restart: %d", n, code)
		}
	}
	c.restart(true)
	for _, n := range names {
		p := waitPPI(t, ns, n, "rebuilt", func(p *metal3.PreprovisioningImage) bool {
			return isReady(p) && p.Status.ImageURL != old[n]
		})
		cleared := false
		for _, v := range h.of(n) {
			if r := cond(v, readyType); r.Status == metav1.ConditionFalse && r.Message == msgCacheLost {
				cleared = true
			}
		}
		if !cleared {
			t.Errorf("%s: Ready was not cleared for the lost image", n)
		}
		if code, _ := download(t, old[n]); code != http.StatusNotFound {
			t.Errorf("%s: old URL answers %d", n, code)
		}
		if code, _ := download(t, p.Status.ImageURL); code != 200 {
			t.Errorf("%s: new URL answers %d", n, code)
		}
	}
	waitEvent(t, ns, "host-0", EventImageCacheLost)
}

// A Secret change that does not touch its data (the host controller's finalizer, a label) moves
// status.networkData.version without a rebuild and without clearing Ready.
func TestSecretMetadataChangeKeepsImage(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	h := watchPPIs(t, ns)
	sec := networkSecret(ns, "nd", staticNMState)
	ppi := newPPI(ns, "h")
	ppi.Spec.NetworkDataName = "nd"
	create(t, sec, ppi)
	first := waitReady(t, ns, "h")
	update(t, sec, func() { sec.Finalizers = append(sec.Finalizers, metal3.SecretsFinalizer) })
	p := waitPPI(t, ns, "h", "new secret version", func(p *metal3.PreprovisioningImage) bool {
		return p.Status.NetworkData.Version == sec.ResourceVersion
	})
	if p.Status.ImageURL != first.Status.ImageURL || !isReady(p) {
		t.Errorf("image changed: %s", describe(p))
	}
	firstRV, _ := strconv.ParseUint(first.ResourceVersion, 10, 64)
	for _, v := range h.of("h") {
		if rv, _ := strconv.ParseUint(v.ResourceVersion, 10, 64); rv > firstRV && !isReady(v) {
			t.Errorf("Ready was cleared: %s", describe(v))
		}
	}
	update(t, sec, func() { sec.Finalizers = nil })
}

func TestConfigurationErrors(t *testing.T) {
	ns := env.Namespace(t)
	startICCWith(t, ns, []func(*imagebuild.Config){func(c *imagebuild.Config) {
		// No initrd: this server builds ISOs only.
		c.Catalog.For("").Initrd, c.Catalog.For("").Kernel = nil, nil
	}})
	arch := newPPI(ns, "arm")
	arch.Spec.Architecture = "s390x"
	create(t, arch, newPPI(ns, "pxe-only", metal3.ImageFormatInitRD))
	p := waitPPI(t, ns, "arm", "ConfigurationError", func(p *metal3.PreprovisioningImage) bool {
		return cond(p, errorType).Reason == metal3.ImageConfigurationErrorReason
	})
	if m := cond(p, errorType).Message; !strings.HasPrefix(m, "spec.architecture: architecture not supported") || !strings.Contains(m, "s390x") {
		t.Errorf("message %q", m)
	}
	p = waitPPI(t, ns, "pxe-only", "ConfigurationError", func(p *metal3.PreprovisioningImage) bool {
		return cond(p, errorType).Reason == metal3.ImageConfigurationErrorReason
	})
	if m := cond(p, errorType).Message; m != "spec.acceptFormats: no acceptable image format supported (accepted: initrd; this server builds: iso)" {
		t.Errorf("message %q", m)
	}
	// Fixing the spec recovers.
	update(t, p, func() { p.Spec.AcceptFormats = []metal3.ImageFormat{metal3.ImageFormatInitRD, metal3.ImageFormatISO} })
	if p = waitReady(t, ns, "pxe-only"); p.Status.Format != metal3.ImageFormatISO {
		t.Errorf("format %s", p.Status.Format)
	}
}

// Deleting an image that the host still holds keeps it served; once the host's finalizer is gone
// the image is discarded and the object goes.
func TestDeletion(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	p := deletedWhileHeld(t, ns, "host-0")
	update(t, p, func() {
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == metal3.HostPreprovisioningImageFinalizer })
	})
	poll.Until(t, "host-0 gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &metal3.PreprovisioningImage{})
		return err != nil, "still there"
	})
	if code, _ := download(t, p.Status.ImageURL); code != http.StatusNotFound {
		t.Errorf("a deleted image is still served: %d", code)
	}
}

// deletedWhileHeld builds an image held by the host's finalizer, deletes it, and checks that it is
// still served, with ICC's finalizer on it.
func deletedWhileHeld(t *testing.T, ns, name string) *metal3.PreprovisioningImage {
	t.Helper()
	ppi := newPPI(ns, name)
	ppi.Finalizers = []string{metal3.HostPreprovisioningImageFinalizer}
	create(t, ppi)
	p := waitReady(t, ns, name)
	must(t, env.Client.Delete(context.Background(), p))
	p = get(t, ns, name)
	if code, _ := download(t, p.Status.ImageURL); code != http.StatusOK || !slices.Contains(p.Finalizers, metal3.PreprovisioningImageFinalizer) {
		t.Fatalf("the image must stay while the host holds it: %d, %v", code, p.Finalizers)
	}
	return p
}

// An image whose object went without ICC's finalizer step (every finalizer removed by hand while
// another held the deleted object) is not served any more either.
func TestDeletedWithoutFinalizerStep(t *testing.T) {
	ns := env.Namespace(t)
	startICC(t, ns)
	p := deletedWhileHeld(t, ns, "host-0")
	update(t, p, func() { p.Finalizers = nil })
	poll.Until(t, "the image no longer served", func() (bool, string) {
		code, _ := download(t, p.Status.ImageURL)
		return code == http.StatusNotFound, "HTTP " + strconv.Itoa(code)
	})
}

// The same while the controller was down: no event will come for the object, and the start-up
// sweep stops serving its image; an image whose object exists stays served, even when the
// restarted controller no longer caches its namespace.
func TestDeletedWhileDown(t *testing.T) {
	ns := env.Namespace(t)
	c := startICC(t, ns)
	create(t, newPPI(ns, "kept"))
	kept := waitReady(t, ns, "kept")
	p := deletedWhileHeld(t, ns, "gone")
	c.stop()
	update(t, p, func() { p.Finalizers = nil })
	c.ns = env.Namespace(t) // the restarted controller watches another namespace only
	c.start()
	poll.Until(t, "the orphaned image no longer served", func() (bool, string) {
		code, _ := download(t, p.Status.ImageURL)
		return code == http.StatusNotFound, "HTTP " + strconv.Itoa(code)
	})
	if code, _ := download(t, kept.Status.ImageURL); code != http.StatusOK {
		t.Errorf("the sweep discarded an image whose object exists: HTTP %d", code)
	}
}

// A large ISO's checksum comes from the background worker: the annotation appears afterwards.
func TestBackgroundChecksum(t *testing.T) {
	ns := env.Namespace(t)
	startICCWith(t, ns, []func(*imagebuild.Config){func(c *imagebuild.Config) { c.SyncChecksumLimit = 1 }})
	create(t, newPPI(ns, "big"))
	p := waitPPI(t, ns, "big", "checksum annotation", func(p *metal3.PreprovisioningImage) bool {
		return isReady(p) && p.Annotations[metal3.ImageSHA256Annotation] != ""
	})
	_, image := download(t, p.Status.ImageURL)
	if !strings.HasPrefix(p.Annotations[metal3.ImageSHA256Annotation], sha256hex(image)+"  ") {
		t.Errorf("annotation %q", p.Annotations[metal3.ImageSHA256Annotation])
	}
}

// waitEvent waits for an Event with reason about the named object.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	poll.Until(t, "event "+reason, func() (bool, string) {
		var evs corev1.EventList
		if err := env.Client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, strings.Join(seen, ",")
	})
}
