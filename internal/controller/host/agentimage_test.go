package host

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

var (
	iso, initrd = metal3.ImageFormatISO, metal3.ImageFormatInitRD
	testWant    = metal3.PreprovisioningImageSpec{NetworkDataName: "net", Architecture: "x86_64", AcceptFormats: []metal3.ImageFormat{iso, initrd}}
)

func imageHost() *metal3.BareMetalHost {
	h := newHost("ns", "h").Build()
	h.UID = "host-uid"
	h.Labels = map[string]string{"infraenvs.agent-install.openshift.io": "env1"}
	return h
}

// builtImage is the host's image as a builder leaves it after a successful build of want.
func builtImage(h *metal3.BareMetalHost, want metal3.PreprovisioningImageSpec, version string) *metal3.PreprovisioningImage {
	ppi := &metal3.PreprovisioningImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: h.Name, Generation: 2, UID: "ppi-uid",
			OwnerReferences: []metav1.OwnerReference{ownerRef(h)}},
		Spec: *want.DeepCopy(),
		Status: metal3.PreprovisioningImageStatus{
			ImageURL: "http://images/h.iso", Format: iso, Architecture: want.Architecture,
			NetworkData: metal3.SecretStatus{Name: want.NetworkDataName, Version: version},
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: metal3.ImageSuccessReason, ObservedGeneration: 2},
				{Type: "Error", Status: metav1.ConditionFalse, Reason: metal3.ImageSuccessReason, ObservedGeneration: 2},
			},
		},
	}
	return ppi
}

func TestCheckImage(t *testing.T) {
	h := imageHost()
	tests := map[string]struct {
		change  func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage
		version string
		ready   *provisioner.PreprovisioningImage
		waiting string // substring
		err     string // substring
	}{
		"built for the current spec and network data": {
			ready: &provisioner.PreprovisioningImage{ImageURL: "http://images/h.iso", Format: iso},
		},
		"initrd hands over kernel and parameters": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.Format, p.Status.ImageURL, p.Status.KernelURL, p.Status.ExtraKernelParams = initrd, "http://i/initrd", "http://i/kernel", "ip=dhcp"
				return p
			},
			ready: &provisioner.PreprovisioningImage{ImageURL: "http://i/initrd", KernelURL: "http://i/kernel", ExtraKernelParams: "ip=dhcp", Format: initrd},
		},
		"none yet": {
			change:  func(*metal3.PreprovisioningImage) *metal3.PreprovisioningImage { return nil },
			waiting: `the image builder to build PreprovisioningImage "h" (iso or initrd, x86_64, network data Secret "net")`,
		},
		"another object controls it": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.OwnerReferences[0].UID, p.OwnerReferences[0].Kind = "old-host", "BareMetalHost"
				return p
			},
			waiting: `PreprovisioningImage "h" to be deleted: it belongs to another BareMetalHost`,
		},
		"being deleted": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				now := metav1.Now()
				p.DeletionTimestamp = &now
				return p
			},
			waiting: `PreprovisioningImage "h" to finish deleting (it is then created again)`,
		},
		"spec outdated (written now)": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Spec.Architecture = "aarch64"
				return p
			},
			waiting: `the image builder to build PreprovisioningImage "h" (iso or initrd, x86_64, network data Secret "net")`,
		},
		"build error of this generation": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.Conditions[1] = metav1.Condition{Type: "Error", Status: metav1.ConditionTrue, Reason: metal3.ImageBuildInvalidReason,
					Message: "nmstatectl:\n  interfaces[0].name:   missing", ObservedGeneration: 2}
				return p
			},
			err: `PreprovisioningImage "h" could not be built (ImageBuildInvalid): nmstatectl: interfaces[0].name: missing`,
		},
		"build error of an older generation is not the verdict": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.Conditions[1] = metav1.Condition{Type: "Error", Status: metav1.ConditionTrue, Reason: metal3.ImageBuildInvalidReason, ObservedGeneration: 1}
				p.Status.Conditions[0].Status, p.Status.Conditions[0].ObservedGeneration = metav1.ConditionFalse, 1
				return p
			},
			waiting: `the image builder to build PreprovisioningImage "h" (iso or initrd, x86_64, network data Secret "net")`,
		},
		"ready for an older generation": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.Conditions[0].ObservedGeneration = 1
				return p
			},
			waiting: `the image builder to build PreprovisioningImage "h" (iso or initrd, x86_64, network data Secret "net")`,
		},
		"no conditions yet": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status = metal3.PreprovisioningImageStatus{}
				return p
			},
			waiting: `the image builder to build PreprovisioningImage "h" (iso or initrd, x86_64, network data Secret "net")`,
		},
		"built for another architecture": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.Architecture = "aarch64"
				return p
			},
			waiting: `to rebuild PreprovisioningImage "h" for architecture x86_64 (it is built for "aarch64")`,
		},
		"built in a format the BMC does not boot": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Spec.AcceptFormats = []metal3.ImageFormat{initrd}
				return p
			},
			waiting: `to build PreprovisioningImage "h" (iso or initrd`, // the spec is ours to fix first
		},
		"built with another network data Secret": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.NetworkData.Name = "old-net"
				return p
			},
			waiting: `with network data Secret "net" (it is built with "old-net")`,
		},
		"network data Secret missing": {
			version: "-",
			waiting: `network data Secret "net" (spec.preprovisioningNetworkDataName) to exist`,
		},
		"built from an older version of the network data": {
			version: "17",
			waiting: `with the current network data (Secret "net" is at version 17, the image has version 12)`,
		},
		"built from a newer version than the host's cache shows": {
			version: "9",
			ready:   &provisioner.PreprovisioningImage{ImageURL: "http://images/h.iso", Format: iso},
		},
		"no URL yet": {
			change: func(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
				p.Status.ImageURL = ""
				return p
			},
			waiting: `the image builder to publish the URL of PreprovisioningImage "h"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ppi := builtImage(h, testWant, "12")
			if tc.change != nil {
				ppi = tc.change(ppi)
			}
			version := "12"
			switch tc.version {
			case "-":
				version = ""
			case "":
			default:
				version = tc.version
			}
			got := checkImage(h, ppi, testWant, version)
			switch {
			case tc.ready != nil:
				if got.ready == nil || *got.ready != *tc.ready || got.waiting != "" || got.err != "" {
					t.Errorf("got %+v, want ready %+v", got, tc.ready)
				}
			case tc.err != "":
				if got.ready != nil || !strings.Contains(got.err, tc.err) || !strings.HasPrefix(got.err, imageErrorPrefix) {
					t.Errorf("got %+v, want error %q", got, tc.err)
				}
			default:
				if got.ready != nil || got.err != "" || !strings.Contains(got.waiting, tc.waiting) {
					t.Errorf("got %+v, want waiting for %q", got, tc.waiting)
				}
			}
		})
	}
	// The wrong format is caught on the image's status too (when the spec already accepts only
	// what the BMC boots).
	initrdOnly := metal3.PreprovisioningImageSpec{Architecture: "x86_64", AcceptFormats: []metal3.ImageFormat{initrd}}
	if got := checkImage(h, builtImage(h, initrdOnly, ""), initrdOnly, ""); !strings.Contains(got.waiting, `as initrd (it is built as "iso")`) {
		t.Errorf("ISO for an initrd-only host: %+v", got)
	}
}

func TestPlanImage(t *testing.T) {
	h := imageHost()
	mine := builtImage(h, testWant, "12")
	mine.Labels = map[string]string{"infraenvs.agent-install.openshift.io": "env1", "other": "kept"}
	tests := map[string]struct {
		ppi  *metal3.PreprovisioningImage
		use  imageUse
		want string // create, update, remove or ""
		// check looks at the written object.
		check func(t *testing.T, w imageWrite)
	}{
		"needed and missing: created": {
			use: imageBooted, want: "create",
			check: func(t *testing.T, w imageWrite) {
				t.Helper()
				c := w.create
				if c.Name != "h" || c.Namespace != "ns" || !reflect.DeepEqual(c.Spec, testWant) ||
					c.Labels["infraenvs.agent-install.openshift.io"] != "env1" || !controlledBy(c, h) {
					t.Errorf("created %+v", c)
				}
			},
		},
		"kept and up to date: nothing":    {ppi: mine, use: imageKept},
		"left alone":                      {ppi: mine, use: imageLeft},
		"left alone when missing":         {use: imageLeft},
		"done with the agent: deleted":    {ppi: mine, use: imageDeleted, want: "remove"},
		"done, and none: nothing":         {use: imageDeleted},
		"done, but not ours: not deleted": {ppi: foreign(mine), use: imageDeleted},
		"needed, but not ours: untouched": {ppi: foreign(mine), use: imageBooted},
		"being deleted: untouched": {ppi: func() *metal3.PreprovisioningImage {
			p := mine.DeepCopy()
			now := metav1.Now()
			p.DeletionTimestamp = &now
			return p
		}(), use: imageBooted},
		"being deleted, held by metal3's host finalizer: released": {ppi: func() *metal3.PreprovisioningImage {
			p := mine.DeepCopy()
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Finalizers = []string{metal3.PreprovisioningImageFinalizer, metal3.HostPreprovisioningImageFinalizer}
			return p
		}(), use: imageBooted, want: "update",
			check: func(t *testing.T, w imageWrite) {
				t.Helper()
				if !reflect.DeepEqual(w.update.Finalizers, []string{metal3.PreprovisioningImageFinalizer}) || !reflect.DeepEqual(w.update.Spec, w.before.Spec) {
					t.Errorf("finalizers %v, spec %+v (before %+v)", w.update.Finalizers, w.update.Spec, w.before.Spec)
				}
			}},
		"spec outdated: updated": {
			ppi: func() *metal3.PreprovisioningImage { p := mine.DeepCopy(); p.Spec.Architecture = "aarch64"; return p }(),
			use: imageKept, want: "update",
			check: func(t *testing.T, w imageWrite) {
				t.Helper()
				if w.update.Spec.Architecture != "x86_64" || w.before.Spec.Architecture != "aarch64" {
					t.Errorf("update %+v from %+v", w.update.Spec, w.before.Spec)
				}
			},
		},
		"host label changed: copied, other labels kept": {
			ppi: func() *metal3.PreprovisioningImage {
				p := mine.DeepCopy()
				p.Labels["infraenvs.agent-install.openshift.io"] = "env0"
				return p
			}(),
			use: imageBooted, want: "update",
			check: func(t *testing.T, w imageWrite) {
				t.Helper()
				if w.update.Labels["infraenvs.agent-install.openshift.io"] != "env1" || w.update.Labels["other"] != "kept" {
					t.Errorf("labels %v", w.update.Labels)
				}
			},
		},
		"made before the host: adopted": {
			ppi: func() *metal3.PreprovisioningImage { p := mine.DeepCopy(); p.OwnerReferences = nil; return p }(),
			use: imageKept, want: "update",
			check: func(t *testing.T, w imageWrite) {
				t.Helper()
				if !controlledBy(w.update, h) {
					t.Errorf("owner references %+v", w.update.OwnerReferences)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := planImage(h, tc.ppi, tc.use, testWant)
			got := ""
			switch {
			case w.create != nil:
				got = "create"
			case w.update != nil:
				got = "update"
			case w.remove != nil:
				got = "remove"
			}
			if got != tc.want || (got == "" && !w.empty()) {
				t.Fatalf("write %q (%+v), want %q", got, w, tc.want)
			}
			if tc.check != nil {
				tc.check(t, w)
			}
		})
	}
}

func init() {
	// TestTransitions: a deleted host whose image failed skips cleaning.
	setups[Transition{metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, triggerImageFailedWhileDeleting}] =
		func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
			t.Helper()
			provisionIn(t, s, fix)
			deleted(s.host)
			s.cfg.PreprovisioningImages = true
			s.in.imageFormats = []metal3.ImageFormat{initrd}
			ppi := builtImage(s.host, imageSpec(s.host, s.in.imageFormats), "")
			ppi.Status.Conditions[1].Status = metav1.ConditionTrue
			s.in.image = ppi
		}
}

func foreign(p *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
	p = p.DeepCopy()
	p.OwnerReferences[0].UID = "someone-else"
	return p
}

// TestImageUseOfStates: what each state needs of the image, for the hosts whose spec changes it.
func TestImageUseOfStates(t *testing.T) {
	live := metal3.DiskFormatLiveISO
	host := func(change func(h *metal3.BareMetalHost)) *metal3.BareMetalHost {
		h := imageHost()
		if change != nil {
			change(h)
		}
		return h
	}
	noCleaning := func(h *metal3.BareMetalHost) { h.Spec.AutomatedCleaningMode = metal3.CleaningModeDisabled }
	tests := map[string]struct {
		state metal3.ProvisioningState
		host  *metal3.BareMetalHost
		want  imageUse
	}{
		"registering builds it":                     {metal3.StateRegistering, host(nil), imageKept},
		"registering an externally provisioned one": {metal3.StateRegistering, host(func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true }), imageLeft},
		"inspecting boots the agent":                {metal3.StateInspecting, host(nil), imageBooted},
		"fast inspection reads the BMC":             {metal3.StateInspecting, host(func(h *metal3.BareMetalHost) { h.Spec.InspectionMode = metal3.InspectionModeFast }), imageKept},
		"fast inspection on a BMC without it boots the agent": {metal3.StateInspecting, host(func(h *metal3.BareMetalHost) {
			h.Spec.InspectionMode, h.Spec.BMC.Address = metal3.InspectionModeFast, "ipmi://10.0.0.1"
		}), imageBooted},
		"inspection disabled while inspecting": {metal3.StateInspecting, host(func(h *metal3.BareMetalHost) {
			h.Spec.InspectionMode = metal3.InspectionModeDisabled
		}), imageKept},
		"preparing boots the agent":    {metal3.StatePreparing, host(nil), imageBooted},
		"available keeps it ready":     {metal3.StateAvailable, host(nil), imageKept},
		"provisioning boots the agent": {metal3.StateProvisioning, host(nil), imageBooted},
		"a live ISO without cleaning does not": {metal3.StateProvisioning, host(func(h *metal3.BareMetalHost) {
			h.Spec.Image.DiskFormat = &live
			noCleaning(h)
		}), imageKept},
		"provisioned: deleted (seed 001)":      {metal3.StateProvisioned, host(nil), imageDeleted},
		"externally provisioned: deleted":      {metal3.StateExternallyProvisioned, host(nil), imageDeleted},
		"servicing boots the agent (the hook)": {metal3.StateProvisioned, host(func(h *metal3.BareMetalHost) { h.Status.OperationalStatus = metal3.OperationalStatusServicing }), imageBooted},
		"a failed servicing keeps it for the retry": {metal3.StateProvisioned, host(func(h *metal3.BareMetalHost) {
			h.Status.OperationalStatus, h.Status.ErrorType = metal3.OperationalStatusError, metal3.ServicingError
		}), imageBooted},
		"deprovisioning cleans with the agent": {metal3.StateDeprovisioning, host(nil), imageBooted},
		"deprovisioning without cleaning":      {metal3.StateDeprovisioning, host(noCleaning), imageLeft},
		"powering off before delete":           {metal3.StatePoweringOffBeforeDelete, host(nil), imageDeleted},
		"deleting":                             {metal3.StateDeleting, host(nil), imageDeleted},
		"unmanaged":                            {metal3.StateUnmanaged, host(nil), imageLeft},
	}
	for name, tc := range tests {
		if got := stateOf(tc.state).agentImage(tc.host); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

func TestImageArchitecture(t *testing.T) {
	h := imageHost()
	if got := imageArchitecture(h); got != provisioner.ControllerArchitecture {
		t.Errorf("no spec, no inspection: %q, want the operator's %q", got, provisioner.ControllerArchitecture)
	}
	h.Status.HardwareDetails = &metal3.HardwareDetails{CPU: metal3.CPU{Arch: "aarch64"}}
	if got := imageArchitecture(h); got != "aarch64" {
		t.Errorf("inspected aarch64: %q", got)
	}
	h.Spec.Architecture = "ppc64le"
	if got := imageArchitecture(h); got != "ppc64le" {
		t.Errorf("spec ppc64le: %q", got)
	}
	for goarch, want := range map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"} {
		if got := provisioner.Architecture(goarch); got != want {
			t.Errorf("GOARCH %s: %q, want %q", goarch, got, want)
		}
	}
}

func TestSanitizeMessage(t *testing.T) {
	if got := sanitizeMessage("  error:\n\tline two\r\n  "); got != "error: line two" {
		t.Errorf("whitespace: %q", got)
	}
	long := strings.Repeat("é", messageLimit)
	got := sanitizeMessage(long)
	if len(got) > messageLimit || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "é") {
		t.Errorf("long message: %d bytes", len(got))
	}
	for _, r := range strings.TrimSuffix(got, "…") {
		if r != 'é' {
			t.Fatalf("cut inside a character: %q", got)
		}
	}
}

// TestWaitingForImageSaysSinceWhen: the Progressing message says since when the host waits for
// its image, and the time stays while what it waits for changes.
func TestWaitingForImageSaysSinceWhen(t *testing.T) {
	h := imageHost()
	h.Status.Provisioning.State = metal3.StateRegistering
	t0 := metav1.NewTime(time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC))
	wait := outcome{kind: kindWait, waitingFor: "the image builder to build X", progressReason: reasonWaitingForImage}
	setConditions(h, wait, t0)
	c := condition(h, metal3.ProgressingCondition)
	if c.Reason != reasonWaitingForImage || c.Message != "Waiting for the image builder to build X since 2026-07-01T10:00:00Z" {
		t.Fatalf("Progressing %+v", c)
	}
	wait.waitingFor = "the image builder to rebuild X"
	setConditions(h, wait, metav1.NewTime(t0.Add(time.Minute)))
	c = condition(h, metal3.ProgressingCondition)
	if c.Message != "Waiting for the image builder to rebuild X since 2026-07-01T10:00:00Z" || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("a later wait for the image: %+v", c)
	}
	setConditions(h, outcome{kind: kindWait, waitingFor: "something else"}, metav1.NewTime(t0.Add(2*time.Minute)))
	if c = condition(h, metal3.ProgressingCondition); c.Reason != metal3.RegisteringReason || strings.Contains(c.Message, "since") {
		t.Fatalf("after the image wait: %+v", c)
	}
}
