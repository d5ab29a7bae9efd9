package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

// Live updates on real Ironic, through the Kubernetes API only: HostFirmwareSettings,
// HostFirmwareComponents, a HostUpdatePolicy and the reboot annotation.

// liveUpdateSettings: an invalid BIOS setting is refused (a message naming it, no servicing on
// reboot); a valid one is applied on reboot by servicing (operationalStatus servicing → OK), the
// host stays provisioned, bmcsim's Redfish Bios resource shows the value and so does the
// HostFirmwareSettings status. The FirmwareSchema carries the BMC's attribute registry.
func (s *suite) liveUpdateSettings(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, path := s.diskImage(ns+"-bios", true)
	s.provisioned(t, ns, "bios", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	downloads := s.Images.Downloads(path)
	s.createPolicy(t, ns, "bios", metal3.HostUpdatePolicySpec{FirmwareSettings: metal3.HostUpdatePolicyOnReboot})
	hfs := s.waitHFS(t, ns, "bios", "filled in from Ironic", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.FirmwareSchema != nil && hfs.Status.Settings["ProcTurboMode"] == "Enabled"
	})
	schema := &metal3.FirmwareSchema{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: hfs.Status.FirmwareSchema.Name}, schema); err != nil {
		t.Fatalf("reading the FirmwareSchema: %v", err)
	}
	if e := schema.Spec.Schema["ProcTurboMode"]; e.AttributeType != "Enumeration" || !slices.Equal(e.AllowableValues, []string{"Enabled", "Disabled"}) {
		t.Errorf("FirmwareSchema entry of ProcTurboMode %+v: the BIOS attribute registry did not reach it", e)
	}
	if e := schema.Spec.Schema["PowerOnDelaySeconds"]; e.UpperBound == nil || *e.UpperBound != 300 {
		t.Errorf("FirmwareSchema entry of PowerOnDelaySeconds %+v, want the registry's upper bound 300", e)
	}

	// An invalid value: refused, and a reboot does not service.
	s.setHFS(t, ns, "bios", "Off")
	hfs = s.waitHFS(t, ns, "bios", "the invalid value judged", judgedHFS)
	valid := conditionIn(hfs.Status.Conditions, string(metal3.FirmwareSettingsValid))
	want := `spec.settings.ProcTurboMode: "Off" is not an allowed value; allowed: Enabled, Disabled`
	if valid.Status != metav1.ConditionFalse || !strings.Contains(valid.Message, want) {
		t.Errorf("Valid condition %+v, want False naming the setting: %s", valid, want)
	}
	s.waitObjectEvent(t, ns, "HostFirmwareSettings", "bios", "ValidationFailed", want)
	at := time.Now()
	s.rebootAndWait(t, ns, "bios", srv, at)
	for _, snap := range s.rec.history(ns, "bios", at) {
		if snap.opStatus == metal3.OperationalStatusServicing || snap.errorType != "" {
			t.Errorf("during the reboot with an invalid setting: %s, want no servicing", snap)
		}
	}
	if v := s.redfishBIOS(t, srv)["ProcTurboMode"]; v != "Enabled" {
		t.Errorf("bmcsim ProcTurboMode %v after the refused change, want Enabled", v)
	}

	// A valid value: serviced on reboot.
	s.setHFS(t, ns, "bios", "Disabled")
	s.waitHFS(t, ns, "bios", "the change judged valid", func(hfs *metal3.HostFirmwareSettings) bool {
		return judgedHFS(hfs) && conditionIn(hfs.Status.Conditions, string(metal3.FirmwareSettingsValid)).Status == metav1.ConditionTrue
	})
	at = time.Now()
	h := s.serviceAndWait(t, ns, "bios", at)
	if h.Status.Provisioning.State != metal3.StateProvisioned || h.Status.Provisioning.Image.URL != img.URL {
		t.Errorf("after servicing: %s with image %q, want provisioned with %q", h.Status.Provisioning.State, h.Status.Provisioning.Image.URL, img.URL)
	}
	if v := s.redfishBIOS(t, srv)["ProcTurboMode"]; v != "Disabled" {
		t.Errorf("bmcsim's Redfish Bios shows ProcTurboMode %v after servicing, want Disabled", v)
	}
	s.waitHFS(t, ns, "bios", "the new value read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled" &&
			conditionIn(hfs.Status.Conditions, string(metal3.FirmwareSettingsChangeDetected)).Status == metav1.ConditionFalse
	})
	s.wantUntouched(t, srv.Name, img.URL, path, downloads)
	s.leave(ns, "bios", srv.Name, path)
}

// liveUpdateFirmware: a firmware update that the BMC fails ends in servicing error with Ironic's
// message; removing the update aborts and the host returns to OK; an update served by the test is
// then applied, and the new version shows in bmcsim and in status.components.
func (s *suite) liveUpdateFirmware(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, path := s.diskImage(ns+"-fw", true)
	s.provisioned(t, ns, "fw", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	s.createPolicy(t, ns, "fw", metal3.HostUpdatePolicySpec{FirmwareUpdates: metal3.HostUpdatePolicyOnReboot})
	s.waitHFC(t, ns, "fw", "components read", func(hfc *metal3.HostFirmwareComponents) bool {
		return componentVersion(hfc, "bios") != ""
	})

	// A failing update, then an abort.
	if err := s.Sim.Control.SetFaults(srv.Name, fault.Set{FailFirmwareUpdate: true}); err != nil {
		t.Fatal(err)
	}
	bad := ns + "/bios-3.1.0.bin"
	s.Images.Add("/firmware/"+bad, []byte("firmware that the BMC will refuse"))
	s.setHFC(t, ns, "fw", metal3.FirmwareUpdate{Component: "bios", URL: s.Images.URL + "/firmware/" + bad})
	at := time.Now()
	s.annotate(t, ns, "fw", metal3.RebootAnnotationPrefix)
	h := s.wait(t, ns, "fw", "servicing error", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError
	})
	t.Logf("servicing error after %s: %s", time.Since(at).Round(time.Second), h.Status.ErrorMessage)
	if h.Status.OperationalStatus != metal3.OperationalStatusError || h.Status.ErrorMessage == "" ||
		h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Errorf("after the failed update: %s/%s %q", h.Status.Provisioning.State, h.Status.OperationalStatus, h.Status.ErrorMessage)
	}
	s.waitEvent(t, ns, "fw", corev1.EventTypeWarning, "ServicingError", time.Minute)
	// Removed while the fault stays: the failed live update retries by itself after the error
	// backoff, and a retry that met a cleared fault would flash the firmware before the abort.
	s.setHFC(t, ns, "fw")
	h = s.wait(t, ns, "fw", "aborted and OK", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.ErrorType == "" && h.Status.PoweredOn
	})
	if err := s.Sim.Control.ClearFaults(srv.Name); err != nil {
		t.Fatal(err)
	}
	if n := s.node(t, h.Status.Provisioning.ID); n == nil || n.ProvisionState != "active" {
		t.Errorf("Ironic node after the abort: %+v, want active", n)
	}
	s.waitEvent(t, ns, "fw", corev1.EventTypeNormal, "ServicingAborted", time.Minute)
	if v := s.server(t, srv.Name).State.Firmware.BIOS; v == "3.1.0" {
		t.Errorf("bmcsim BIOS version %s after the failed update", v)
	}

	// A good update.
	good := ns + "/bios-3.2.0.bin"
	s.Images.Add("/firmware/"+good, []byte("firmware the BMC accepts"))
	s.setHFC(t, ns, "fw", metal3.FirmwareUpdate{Component: "bios", URL: s.Images.URL + "/firmware/" + good})
	s.serviceAndWait(t, ns, "fw", time.Now())
	if v := s.server(t, srv.Name).State.Firmware.BIOS; v != "3.2.0" {
		t.Errorf("bmcsim BIOS version %s after the update, want 3.2.0", v)
	}
	// Two writers: the host controller records the update in status.updates, the components
	// controller reads the new version and then finds no change left (ChangeDetected false), so
	// a read in between can show the update recorded with ChangeDetected still true.
	s.waitHFC(t, ns, "fw", "the new version, the update recorded and no change left", func(hfc *metal3.HostFirmwareComponents) bool {
		return componentVersion(hfc, "bios") == "3.2.0" && len(hfc.Status.Updates) == 1 &&
			conditionIn(hfc.Status.Conditions, string(metal3.HostFirmwareComponentsChangeDetected)).Status == metav1.ConditionFalse
	})
	s.leave(ns, "fw", srv.Name, path)
}

// rebootAndWait adds the one-shot reboot annotation and waits until the host went off and came
// back on, the annotation gone.
func (s *suite) rebootAndWait(t *testing.T, ns, name string, srv bmcsim.Host, at time.Time) {
	t.Helper()
	off := s.watchPowerOff(srv.Name)
	s.annotate(t, ns, name, metal3.RebootAnnotationPrefix)
	s.wait(t, ns, name, "rebooted", stepTimeout, func(h *metal3.BareMetalHost) bool {
		_, pending := h.Annotations[metal3.RebootAnnotationPrefix]
		return !pending && h.Status.PoweredOn && poweredOffThenOn(s.rec.history(ns, name, at))
	})
	if !off() {
		t.Errorf("bmcsim never saw %s off during the reboot", srv.Name)
	}
}

// serviceAndWait adds the reboot annotation and waits for the live update: servicing, then OK,
// powered on, provisioned, the annotation gone.
func (s *suite) serviceAndWait(t *testing.T, ns, name string, at time.Time) *metal3.BareMetalHost {
	t.Helper()
	s.annotate(t, ns, name, metal3.RebootAnnotationPrefix)
	h := s.wait(t, ns, name, "serviced", stepTimeout, func(h *metal3.BareMetalHost) bool {
		_, pending := h.Annotations[metal3.RebootAnnotationPrefix]
		serviced := slices.ContainsFunc(s.rec.history(ns, name, at), func(snap snapshot) bool {
			return snap.opStatus == metal3.OperationalStatusServicing
		})
		return serviced && !pending && h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.PoweredOn &&
			h.Status.Provisioning.State == metal3.StateProvisioned
	})
	t.Logf("%s: live update done in %s", name, time.Since(at).Round(time.Second))
	for _, snap := range s.rec.history(ns, name, at) {
		if snap.state != metal3.StateProvisioned || snap.errorType != "" {
			t.Errorf("during the live update: %s, want provisioned without error", snap)
		}
	}
	s.waitEvent(t, ns, name, corev1.EventTypeNormal, "ServicingComplete", time.Minute)
	return h
}

func (s *suite) annotate(t *testing.T, ns, name, key string) {
	t.Helper()
	s.patch(t, ns, name, func(h *metal3.BareMetalHost) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[key] = ""
	})
}

func (s *suite) createPolicy(t *testing.T, ns, name string, spec metal3.HostUpdatePolicySpec) {
	t.Helper()
	p := &metal3.HostUpdatePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := s.c.Create(context.Background(), p); err != nil {
		t.Fatalf("creating the HostUpdatePolicy: %v", err)
	}
}

// setHFS sets ProcTurboMode in the HostFirmwareSettings' spec (the object the operator created).
func (s *suite) setHFS(t *testing.T, ns, name, turbo string) {
	t.Helper()
	s.retryUpdate(t, &metal3.HostFirmwareSettings{}, ns, name, func(o client.Object) {
		o.(*metal3.HostFirmwareSettings).Spec.Settings = metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString(turbo)}
	})
}

// setHFC replaces the HostFirmwareComponents' spec.updates.
func (s *suite) setHFC(t *testing.T, ns, name string, updates ...metal3.FirmwareUpdate) {
	t.Helper()
	s.retryUpdate(t, &metal3.HostFirmwareComponents{}, ns, name, func(o client.Object) {
		o.(*metal3.HostFirmwareComponents).Spec.Updates = append([]metal3.FirmwareUpdate{}, updates...)
	})
}

func (s *suite) retryUpdate(t *testing.T, obj client.Object, ns, name string, change func(client.Object)) {
	t.Helper()
	for range 20 {
		if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			t.Fatalf("reading %T %s: %v", obj, name, err)
		}
		change(obj)
		err := s.c.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("updating %T %s: %v", obj, name, err)
		}
	}
	t.Fatalf("updating %T %s: too many conflicts", obj, name)
}

func (s *suite) waitHFS(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareSettings) bool) *metal3.HostFirmwareSettings {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	s.waitObject(t, hfs, ns, name, what, func() bool { return cond(hfs) })
	return hfs
}

func (s *suite) waitHFC(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareComponents) bool) *metal3.HostFirmwareComponents {
	t.Helper()
	hfc := &metal3.HostFirmwareComponents{}
	s.waitObject(t, hfc, ns, name, what, func() bool { return cond(hfc) })
	return hfc
}

// waitObject polls obj until cond holds (cond reads obj).
func (s *suite) waitObject(t *testing.T, obj client.Object, ns, name, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
		if err == nil && cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%T %s: not %s after %s (last read error %v): %+v", obj, name, what, stepTimeout, err, obj)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitObjectGone polls until the object is gone (a deletion its finalizer held is over).
func (s *suite) waitObjectGone(t *testing.T, obj client.Object, ns, name, when string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%T %s still there %s (%v)", obj, name, when, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitObjectEvent waits for an Event about an object of a kind with the reason and a message
// containing text.
func (s *suite) waitObjectEvent(t *testing.T, ns, kind, name, reason, text string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, e := range s.events(t, ns, name) {
			if e.InvolvedObject.Kind == kind && e.Reason == reason && strings.Contains(e.Message, text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: no %s event with %q; events:%s", kind, name, reason, text, formatEvents(s.events(t, ns, name)))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// judgedHFS: both conditions were computed for the current spec.
func judgedHFS(hfs *metal3.HostFirmwareSettings) bool {
	n := 0
	for _, c := range hfs.Status.Conditions {
		if c.ObservedGeneration == hfs.Generation {
			n++
		}
	}
	return n == 2
}

func conditionIn(conds []metav1.Condition, typ string) metav1.Condition {
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func componentVersion(hfc *metal3.HostFirmwareComponents, component string) string {
	for _, c := range hfc.Status.Components {
		if c.Component == component {
			return c.CurrentVersion
		}
	}
	return ""
}

// redfishBIOS reads the server's Bios resource through its Redfish API, as a client of the BMC
// would (its Attributes).
func (s *suite) redfishBIOS(t *testing.T, srv bmcsim.Host) map[string]any {
	t.Helper()
	addr := srv.Addresses["redfish+http"]
	base, system, ok := strings.Cut(strings.TrimPrefix(addr, "redfish+http://"), "/")
	if !ok {
		t.Fatalf("BMC address %q", addr)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("http://%s/%s/Bios", base, system), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(srv.Username, srv.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("reading the Bios resource: %v", err)
	}
	defer resp.Body.Close()
	var body struct{ Attributes map[string]any }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		t.Fatalf("reading the Bios resource: HTTP %d", resp.StatusCode)
	}
	return body.Attributes
}
