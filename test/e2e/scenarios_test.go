package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

// lean spares Ironic the ramdisk boots a scenario does not need: no inspection, no automated
// cleaning. The lifecycle hosts keep both (the defaults); Ironic's CPU is what limits the suite.
func lean(h *metal3.BareMetalHost) {
	h.Spec.InspectionMode = metal3.InspectionModeDisabled
	h.Spec.AutomatedCleaningMode = metal3.CleaningModeDisabled
}

// provisioned creates a host that already has its image (or custom deploy) and waits until it is
// provisioned and powered on.
func (s *suite) provisioned(t *testing.T, ns, name string, srv bmcsim.Host, modify func(*metal3.BareMetalHost)) *metal3.BareMetalHost {
	t.Helper()
	s.newHost(t, ns, name, srv, "", modify)
	s.waitState(t, ns, name, metal3.StateProvisioned, stepTimeout)
	return s.wait(t, ns, name, "powered on", time.Minute, func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
}

// liveISO boots an ISO through Ironic's ramdisk deploy: provisioned, booted from the virtual CD,
// nothing written to disk.
func (s *suite) liveISO(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	live := metal3.DiskFormatLiveISO
	img := metal3.Image{URL: s.Images.URL + "/live.iso", DiskFormat: &live}
	h := s.provisioned(t, ns, "live", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	if got := h.Status.Provisioning.Image; got.URL != img.URL || !got.IsLiveISO() {
		t.Errorf("status.provisioning.image %+v, want the live ISO %s", got, img.URL)
	}
	wantCondition(t, h, metal3.ProvisionedCondition, metav1.ConditionTrue)
	if st := s.server(t, srv.Name); st.State.Booted != "Cd" || st.State.Power != "On" || st.State.DiskImage != "" {
		t.Errorf("bmcsim: booted %q (%s) power %s disk %q; want the CD, On, nothing written",
			st.State.Booted, st.State.BootedImage, st.State.Power, st.State.DiskImage)
	}
	if n := s.node(t, h.Status.Provisioning.ID); n == nil || n.DeployInterface != "ramdisk" || n.ProvisionState != "active" {
		t.Errorf("Ironic node of the live ISO host: %+v, want active with the ramdisk deploy interface", n)
	}
}

// customDeploy runs the agent's install_coreos deploy step instead of writing an image.
func (s *suite) customDeploy(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	h := s.provisioned(t, ns, "coreos", srv, func(h *metal3.BareMetalHost) {
		lean(h)
		h.Spec.CustomDeploy = &metal3.CustomDeploy{Method: "install_coreos"}
	})
	if cd := h.Status.Provisioning.CustomDeploy; cd == nil || cd.Method != "install_coreos" {
		t.Errorf("status.provisioning.customDeploy %+v, want install_coreos", cd)
	}
	if st := s.server(t, srv.Name); !strings.HasPrefix(st.State.DiskImage, "coreos-installer://") || st.State.Power != "On" {
		t.Errorf("bmcsim: disk %q power %s; want what install_coreos wrote, On", st.State.DiskImage, st.State.Power)
	}
	if n := s.node(t, h.Status.Provisioning.ID); n == nil || n.DeployInterface != "custom-agent" || n.ProvisionState != "active" {
		t.Errorf("Ironic node of the custom deploy host: %+v, want active with the custom-agent deploy interface", n)
	}
}

// reboot: the one-shot reboot annotation powers the host off, is removed, and the host comes back
// on, still provisioned and not redeployed.
func (s *suite) reboot(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, path := s.diskImage(ns+"-reboot", false)
	s.provisioned(t, ns, "reboot", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	downloads := s.Images.Downloads(path)

	off := s.watchPowerOff(srv.Name)
	at := time.Now()
	s.patch(t, ns, "reboot", func(h *metal3.BareMetalHost) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metal3.RebootAnnotationPrefix] = ""
	})
	s.wait(t, ns, "reboot", "rebooted", stepTimeout, func(h *metal3.BareMetalHost) bool {
		_, pending := h.Annotations[metal3.RebootAnnotationPrefix]
		hist := s.rec.history(ns, "reboot", at)
		return !pending && h.Status.PoweredOn && len(hist) > 0 && poweredOffThenOn(hist)
	})
	if !off() {
		t.Errorf("bmcsim never saw the server off during the reboot")
	}
	for _, snap := range s.rec.history(ns, "reboot", at) {
		if snap.state != metal3.StateProvisioned || snap.errorType != "" {
			t.Errorf("during the reboot: %s, want provisioned without error", snap)
		}
	}
	// No PoweredOff/PoweredOn Events are asserted: the controller emits them only when the
	// provisioner finishes a power change within the reconcile that asked for it (the fixture
	// does), and Ironic's power changes finish in a later one.
	s.wantUntouched(t, srv.Name, img.URL, path, downloads)
	s.leave(ns, "reboot", srv.Name, path)
}

// poweredOffThenOn: the history shows the host off, then on again.
func poweredOffThenOn(h []snapshot) bool {
	off := false
	for _, s := range h {
		if !s.poweredOn {
			off = true
		} else if off {
			return true
		}
	}
	return false
}

// watchPowerOff polls bmcsim until the server is seen off (or a minute passes); the returned
// function waits for the poller and tells whether it was.
func (s *suite) watchPowerOff(server string) func() bool {
	var wg sync.WaitGroup
	var seenOff bool
	stop := make(chan struct{})
	wg.Go(func() {
		deadline := time.Now().Add(stepTimeout)
		for time.Now().Before(deadline) {
			if d, err := s.Sim.Control.Server(server); err == nil && d.State.Power == "Off" {
				seenOff = true
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return func() bool {
		close(stop)
		wg.Wait()
		return seenOff
	}
}

// wantUntouched checks that a provisioned server still runs the same disk, powered on, and that
// its image was not downloaded again (which a new deploy would do).
func (s *suite) wantUntouched(t *testing.T, server, imageURL, path string, downloads int) {
	t.Helper()
	st := s.server(t, server)
	if st.State.DiskImage != imageURL || st.State.Booted != "Hdd" || st.State.Power != "On" {
		t.Errorf("bmcsim %s: disk %q booted %q power %s; want %q, running from it", server,
			st.State.DiskImage, st.State.Booted, st.State.Power, imageURL)
	}
	if path != "" {
		if got := s.Images.Downloads(path); got != downloads {
			t.Errorf("bmcsim %s: the image was downloaded %d more times, want none (no new deploy)", server, got-downloads)
		}
	}
}

// detach removes the host's Ironic node without touching the server; removing the annotation
// registers it again and adopts it, without a new deploy.
func (s *suite) detach(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, path := s.diskImage(ns+"-detach", true)
	h := s.provisioned(t, ns, "detach", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	oldNode, downloads := h.Status.Provisioning.ID, s.Images.Downloads(path)

	at := time.Now()
	s.patch(t, ns, "detach", func(h *metal3.BareMetalHost) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metal3.DetachedAnnotation] = ""
	})
	h = s.wait(t, ns, "detach", "detached", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDetached
	})
	if h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Errorf("detached host is %s, want provisioned", h.Status.Provisioning.State)
	}
	if n := s.node(t, oldNode); n != nil {
		t.Errorf("Ironic still has node %s (%s) of the detached host", oldNode, n.ProvisionState)
	}
	s.waitEvent(t, ns, "detach", corev1.EventTypeNormal, "Detached", time.Minute)
	s.wantUntouched(t, srv.Name, img.URL, path, downloads)

	s.patch(t, ns, "detach", func(h *metal3.BareMetalHost) { delete(h.Annotations, metal3.DetachedAnnotation) })
	h = s.wait(t, ns, "detach", "attached again and adopted", stepTimeout, func(h *metal3.BareMetalHost) bool {
		id := h.Status.Provisioning.ID
		if h.Status.OperationalStatus != metal3.OperationalStatusOK || id == "" || id == oldNode {
			return false
		}
		n := s.node(t, id)
		return n != nil && n.ProvisionState == "active"
	})
	for _, snap := range s.rec.history(ns, "detach", at) {
		if snap.state != metal3.StateProvisioned || snap.errorType != "" {
			t.Errorf("while detached and attached again: %s, want provisioned without error", snap)
		}
	}
	wantCondition(t, h, metal3.ReadyCondition, metav1.ConditionTrue)
	s.waitEvent(t, ns, "detach", corev1.EventTypeNormal, "Attached", time.Minute)
	s.wantUntouched(t, srv.Name, img.URL, path, downloads)
	s.leave(ns, "detach", srv.Name, path)
}

// wrongCredentials: a Secret with the wrong password gives a registration error that names the
// problem; fixing the Secret lets the host go on, without anyone touching the host.
func (s *suite) wrongCredentials(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	wrong := "wrong-" + randomHex(8)
	s.mu.Lock()
	s.wrongPasswords = append(s.wrongPasswords, wrong)
	s.mu.Unlock()
	s.newHost(t, ns, "creds", srv, wrong, func(h *metal3.BareMetalHost) {
		h.Spec.AutomatedCleaningMode = metal3.CleaningModeDisabled
	})
	h := s.wait(t, ns, "creds", "registration error", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.RegistrationError
	})
	firstError := time.Now()
	msg := h.Status.ErrorMessage
	if !strings.Contains(msg, "credentials") || !strings.Contains(msg, "401") {
		t.Errorf("registration error %q does not say the BMC rejected the credentials", msg)
	}
	if h.Status.Provisioning.State != metal3.StateRegistering || h.Status.OperationalStatus != metal3.OperationalStatusError {
		t.Errorf("host is %s/%s with the wrong password, want registering/error", h.Status.Provisioning.State, h.Status.OperationalStatus)
	}
	wantCondition(t, h, metal3.ManageableCondition, metav1.ConditionFalse)
	ev := s.waitEvent(t, ns, "creds", corev1.EventTypeWarning, "RegistrationError", time.Minute)
	if !strings.Contains(ev.Message, "credentials") {
		t.Errorf("RegistrationError event %q does not name the problem", ev.Message)
	}
	// The same wrong password is tried again after a backoff (2-4 s, then 4-8 s, ...), and each
	// failure is counted: errorCount grows, but never faster than the shortest backoff allows.
	s.wait(t, ns, "creds", "registration retried and failed again", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorCount >= 2
	})
	time.Sleep(5 * time.Second)
	h = s.get(t, ns, "creds")
	if most := 1 + int(time.Since(firstError)/(2*time.Second)); h.Status.ErrorCount > most {
		t.Errorf("errorCount %d %s after the first registration error: more than one failure per 2 s backoff (%d); history:%s",
			h.Status.ErrorCount, time.Since(firstError).Round(time.Second), most, formatHistory(s.rec.history(ns, "creds", time.Time{})))
	}

	var secret corev1.Secret
	key := types.NamespacedName{Namespace: ns, Name: h.Spec.BMC.CredentialsName}
	if err := s.c.Get(context.Background(), key, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["password"] = []byte(srv.Password)
	if err := s.c.Update(context.Background(), &secret); err != nil {
		t.Fatalf("fixing the Secret: %v", err)
	}
	h = s.waitState(t, ns, "creds", metal3.StateAvailable, stepTimeout)
	if h.Status.ErrorCount != 0 || h.Status.GoodCredentials.Version != secret.ResourceVersion {
		t.Errorf("after the fix: errorCount %d, goodCredentials %+v; want 0 and Secret version %s",
			h.Status.ErrorCount, h.Status.GoodCredentials, secret.ResourceVersion)
	}
	wantCondition(t, h, metal3.ManageableCondition, metav1.ConditionTrue)
	s.checkHardware(t, ns, "creds", srv.Name)
}

// bmcFailure: the server's agent crashes in the middle of the deploy; Ironic fails the deploy,
// the host records a provisioning error and backs off; with the fault cleared the retry
// provisions it.
func (s *suite) bmcFailure(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, path := s.diskImage(ns+"-crash", true)
	s.newHost(t, ns, "crash", srv, "", lean)
	s.waitState(t, ns, "crash", metal3.StateAvailable, stepTimeout)
	if err := s.Sim.Control.SetFaults(srv.Name, fault.Set{FailDeploy: true}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	s.patch(t, ns, "crash", func(h *metal3.BareMetalHost) { h.Spec.Image = &img })
	h := s.wait(t, ns, "crash", "provisioning error", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ProvisioningError
	})
	if err := s.Sim.Control.ClearFaults(srv.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("provisioning error after %s: %s", time.Since(at).Round(time.Second), h.Status.ErrorMessage)
	if h.Status.ErrorCount < 1 || h.Status.OperationalStatus != metal3.OperationalStatusError || h.Status.ErrorMessage == "" {
		t.Errorf("after the crash: errorCount %d, operationalStatus %s, message %q", h.Status.ErrorCount, h.Status.OperationalStatus, h.Status.ErrorMessage)
	}
	if c := condition(h, metal3.ProgressingCondition); c == nil || !strings.Contains(c.Message, "retry") {
		t.Errorf("Progressing condition %+v, want it to say the host waits for a retry", c)
	}
	s.waitEvent(t, ns, "crash", corev1.EventTypeWarning, "ProvisioningError", time.Minute)

	h = s.waitState(t, ns, "crash", metal3.StateProvisioned, stepTimeout)
	if h.Status.ErrorCount != 0 {
		t.Errorf("errorCount %d after the successful retry, want 0", h.Status.ErrorCount)
	}
	s.wait(t, ns, "crash", "powered on", time.Minute, func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
	st := s.server(t, srv.Name)
	if st.State.DiskImage != img.URL || st.State.Power != "On" {
		t.Errorf("bmcsim after the retry: disk %q power %s, want %q On", st.State.DiskImage, st.State.Power, img.URL)
	}
	// The backoff: after the error the host stays put for at least the first backoff (the
	// operator runs with --error-backoff-base=2s: 2-4 s) before it moves on.
	hist := s.rec.history(ns, "crash", at)
	for i, snap := range hist {
		if snap.errorType != metal3.ProvisioningError {
			continue
		}
		for _, next := range hist[i+1:] {
			if next.state != snap.state {
				if wait := next.at.Sub(snap.at); wait < 1500*time.Millisecond {
					t.Errorf("the host left %s %s after the provisioning error, want a backoff of 2-4 s; history:%s",
						snap.state, wait, formatHistory(hist))
				} else {
					t.Logf("backoff observed: %s in %s after the error", wait.Round(100*time.Millisecond), snap.state)
				}
				break
			}
		}
		break
	}
	s.leave(ns, "crash", srv.Name, path)
}

// provisionedForWipe provisions two hosts for the database-wipe test (more come from the other
// scenarios).
func (s *suite) provisionedForWipe(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	var wg sync.WaitGroup
	for i := range 2 {
		srv := s.Take(t)
		name := fmt.Sprintf("keep-%d", i)
		img, path := s.diskImage(ns+"-"+name, i == 0)
		wg.Go(func() {
			s.provisioned(t, ns, name, srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
			s.leave(ns, name, srv.Name, path)
		})
	}
	wg.Wait()
}

// databaseWiped restarts Ironic with an empty database while hosts are provisioned: the hosts stay
// provisioned, are registered again (new nodes) and adopted, and no server is deployed again.
func (s *suite) databaseWiped(t *testing.T) {
	s.mu.Lock()
	survivors := append([]survivor(nil), s.survivors...)
	s.mu.Unlock()
	if len(survivors) == 0 {
		t.Fatal("no provisioned hosts left by the scenarios")
	}
	type before struct {
		node      string
		downloads int
		disk      string
	}
	was := map[string]before{}
	for _, sv := range survivors {
		h := s.get(t, sv.ns, sv.name)
		if h.Status.Provisioning.State != metal3.StateProvisioned {
			t.Fatalf("%s/%s is %s before the wipe, want provisioned", sv.ns, sv.name, h.Status.Provisioning.State)
		}
		was[sv.ns+"/"+sv.name] = before{node: h.Status.Provisioning.ID, downloads: s.Images.Downloads(sv.imagePath),
			disk: s.server(t, sv.server).State.DiskImage}
	}
	at := time.Now()
	if err := s.Ironic.Restart(true); err != nil {
		t.Fatalf("restarting Ironic with an empty database: %v", err)
	}
	t.Logf("Ironic restarted with an empty database in %s; %d provisioned hosts to adopt", time.Since(at).Round(100*time.Millisecond), len(survivors))
	for _, sv := range survivors {
		b := was[sv.ns+"/"+sv.name]
		s.wait(t, sv.ns, sv.name, "registered again and adopted", stepTimeout, func(h *metal3.BareMetalHost) bool {
			id := h.Status.Provisioning.ID
			if id == "" || id == b.node || h.Status.ErrorType != "" || h.Status.OperationalStatus != metal3.OperationalStatusOK {
				return false
			}
			n := s.node(t, id)
			return n != nil && n.ProvisionState == "active"
		})
	}
	t.Logf("every host adopted %s after the restart began", time.Since(at).Round(100*time.Millisecond))
	for _, sv := range survivors {
		for _, snap := range s.rec.history(sv.ns, sv.name, at) {
			if snap.state != metal3.StateProvisioned {
				t.Errorf("%s/%s left provisioned after the wipe: %s", sv.ns, sv.name, snap)
			}
		}
		b := was[sv.ns+"/"+sv.name]
		st := s.server(t, sv.server)
		if st.State.DiskImage != b.disk || st.State.Power != "On" {
			t.Errorf("%s: bmcsim disk %q→%q power %s after adoption; want the same disk, On", sv.name, b.disk, st.State.DiskImage, st.State.Power)
		}
		if sv.imagePath != "" {
			if got := s.Images.Downloads(sv.imagePath); got != b.downloads {
				t.Errorf("%s: its image was downloaded %d more times after the wipe, want none (no new deploy)", sv.name, got-b.downloads)
			}
		}
	}
}

// noPasswords: no BMC password the suite used, right or wrong, appears in any host's status, any
// Event or the operator's log.
func (s *suite) noPasswords(t *testing.T) {
	secrets := map[string]string{}
	for _, h := range s.Sim.Hosts() {
		secrets[h.Password] = "the password of " + h.Name
	}
	s.mu.Lock()
	for i, p := range s.wrongPasswords {
		secrets[p] = fmt.Sprintf("wrong password %d", i)
	}
	s.mu.Unlock()

	logText, err := os.ReadFile(s.op.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logText), "Ironic provisioner configured") {
		t.Fatalf("%s does not look like the operator's log", s.op.LogPath())
	}
	var hosts metal3.BareMetalHostList
	if err := s.c.List(context.Background(), &hosts); err != nil {
		t.Fatal(err)
	}
	var events corev1.EventList
	if err := s.c.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	var statuses, notes strings.Builder
	for i := range hosts.Items {
		statuses.WriteString(statusJSON(&hosts.Items[i]))
	}
	for _, e := range events.Items {
		notes.WriteString(e.Reason + " " + e.Message + "\n")
	}
	t.Logf("searched %d hosts' status, %d events and %d bytes of operator log for %d passwords",
		len(hosts.Items), len(events.Items), len(logText), len(secrets))
	for pw, what := range secrets {
		for where, text := range map[string]string{"a host status": statuses.String(), "an Event": notes.String(), "the operator log": string(logText)} {
			if strings.Contains(text, pw) {
				t.Errorf("%s appears in %s", what, where)
			}
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
