package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/control"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// survivor is a provisioned host left for the database-wipe test, with what it must keep.
type survivor struct {
	ns, name  string
	server    string
	imagePath string // the image server path its disk came from ("" when nothing was downloaded)
}

func (s *suite) leave(ns, name, server, imagePath string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.survivors = append(s.survivors, survivor{ns: ns, name: name, server: server, imagePath: imagePath})
}

// newHost creates the BMC Secret (with password, "" for the server's own) and a host for a
// simulated server, online, with its boot MAC and the redfish-virtualmedia address. modify may
// change the host before it is created.
func (s *suite) newHost(t *testing.T, ns, name string, srv bmcsim.Host, password string, modify func(*metal3.BareMetalHost)) {
	t.Helper()
	if password == "" {
		password = srv.Password
	}
	secret := builder.BMCSecret(ns, name+"-bmc", srv.Username, password)
	host := builder.BareMetalHost(ns, name).
		WithBMC(srv.Addresses["redfish-virtualmedia+http"], secret.Name).
		WithBootMACAddress(srv.BootMAC).
		WithOnline(true).Build()
	if modify != nil {
		modify(host)
	}
	for _, obj := range []client.Object{secret, host} {
		if err := s.c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
}

// diskImage serves the suite's disk image at a path of the host's own (so its downloads are
// counted alone) and returns the spec, with a real md5 or sha256 checksum.
func (s *suite) diskImage(name string, md5 bool) (metal3.Image, string) {
	path := "/images/" + name + ".img"
	data := s.imageBytes()
	s.Images.Add(path, data)
	raw := "raw"
	img := metal3.Image{URL: s.Images.URL + path, DiskFormat: &raw}
	if md5 {
		img.Checksum, img.ChecksumType = s.Images.MD5(path), metal3.MD5
	} else {
		img.Checksum, img.ChecksumType = s.Images.SHA256(path), metal3.SHA256
	}
	return img, path
}

func (s *suite) imageBytes() []byte {
	// NewImageServer serves 4 MiB of random bytes at /disk.img; every host's image is a copy.
	return s.Images.Bytes("/disk.img")
}

func (s *suite) get(t *testing.T, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	h := &metal3.BareMetalHost{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
		t.Fatalf("getting host %s/%s: %v", ns, name, err)
	}
	return h
}

// wait polls the host until cond holds and returns it. It fails after timeout, showing the status
// history.
func (s *suite) wait(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*metal3.BareMetalHost) bool) *metal3.BareMetalHost {
	t.Helper()
	start := time.Now()
	for {
		h := s.get(t, ns, name)
		if cond(h) {
			t.Logf("%s: %s after %s", name, what, time.Since(start).Round(100*time.Millisecond))
			return h
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not %s after %s; state %s, operationalStatus %s, error %q %q (count %d); history:%s%s",
				name, what, timeout, h.Status.Provisioning.State, h.Status.OperationalStatus, h.Status.ErrorType,
				h.Status.ErrorMessage, h.Status.ErrorCount, formatHistory(s.rec.history(ns, name, time.Time{})),
				s.ironicView(h.Status.Provisioning.ID))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitState waits for a state without an error.
func (s *suite) waitState(t *testing.T, ns, name string, state metal3.ProvisioningState, timeout time.Duration) *metal3.BareMetalHost {
	t.Helper()
	return s.wait(t, ns, name, string(state), timeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == state && h.Status.ErrorType == "" && h.Status.OperationalStatus == metal3.OperationalStatusOK
	})
}

// patch changes a host with a merge patch (no conflicts with the operator's status writes).
func (s *suite) patch(t *testing.T, ns, name string, change func(*metal3.BareMetalHost)) {
	t.Helper()
	h := s.get(t, ns, name)
	before := h.DeepCopy()
	change(h)
	if err := s.c.Patch(context.Background(), h, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching host %s: %v", name, err)
	}
}

// events lists the Events about an object, oldest first.
func (s *suite) events(t *testing.T, ns, name string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := s.c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": name}); err != nil {
		t.Fatalf("listing events of %s: %v", name, err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return list.Items
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// waitEvent waits for an Event with the reason (and type) about an object.
func (s *suite) waitEvent(t *testing.T, ns, name, eventType, reason string, timeout time.Duration) corev1.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		evs := s.events(t, ns, name)
		for _, e := range evs {
			if e.Reason == reason && e.Type == eventType {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s event %s after %s; events:%s", name, eventType, reason, timeout, formatEvents(evs))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func formatEvents(evs []corev1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n    %s %s: %s", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// transitionNotes joins the notes of the Normal state-change events, which name every state a
// host passed through ("State changed: registering → inspecting → ...").
func transitionNotes(evs []corev1.Event) string {
	var notes []string
	for _, e := range evs {
		if e.Type == corev1.EventTypeNormal && strings.HasPrefix(e.Message, "State changed: ") {
			notes = append(notes, strings.TrimPrefix(e.Message, "State changed: "))
		}
	}
	return strings.Join(notes, " | ")
}

// condition returns a host condition by type.
func condition(h *metal3.BareMetalHost, typ string) *metav1.Condition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == typ {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// wantCondition checks a condition's status (and that it is computed for the current generation).
func wantCondition(t *testing.T, h *metal3.BareMetalHost, typ string, status metav1.ConditionStatus) {
	t.Helper()
	c := condition(h, typ)
	switch {
	case c == nil:
		t.Errorf("%s: no %s condition", h.Name, typ)
	case c.Status != status:
		t.Errorf("%s: condition %s is %s (%s: %s), want %s", h.Name, typ, c.Status, c.Reason, c.Message, status)
	case c.ObservedGeneration != h.Generation:
		t.Errorf("%s: condition %s observed generation %d, host is at %d", h.Name, typ, c.ObservedGeneration, h.Generation)
	}
}

// wantOperation checks that an operation of operationHistory started and ended, in order, after since.
func wantOperation(t *testing.T, h *metal3.BareMetalHost, what string, op metal3.OperationMetric, since time.Time) {
	t.Helper()
	// Status times have second precision.
	since = since.Truncate(time.Second)
	switch {
	case op.Start.IsZero() || op.End.IsZero():
		t.Errorf("%s: operationHistory.%s = %+v, want start and end", h.Name, what, op)
	case op.End.Before(&op.Start):
		t.Errorf("%s: operationHistory.%s ends %s before it starts %s", h.Name, what, op.End, op.Start)
	case op.Start.Time.Before(since):
		t.Errorf("%s: operationHistory.%s started %s, before the step began at %s", h.Name, what, op.Start, since)
	}
}

// server reads a simulated server's state through bmcsim's control API.
func (s *suite) server(t *testing.T, name string) control.Detail {
	t.Helper()
	d, err := s.Sim.Control.Server(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// node reads an Ironic node (assertions only); nil when Ironic does not know it.
func (s *suite) node(t *testing.T, id string) *nodes.Node {
	t.Helper()
	n, err := nodes.Get(context.Background(), s.nodes, id).Extract()
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading Ironic node %s: %v", id, err)
	}
	return n
}

// ironicView is what Ironic says of a node, for a failure's message: its states, its last error
// and its last warnings and errors in Ironic's log (a timeout's cause is often only there).
func (s *suite) ironicView(id string) string {
	if id == "" {
		return ""
	}
	var b strings.Builder
	n, err := nodes.Get(context.Background(), s.nodes, id).Extract()
	if err != nil {
		fmt.Fprintf(&b, "\nIronic node %s: %v", id, err)
	} else {
		fmt.Fprintf(&b, "\nIronic node %s: %s → %q, power %s, last_error %q", id, n.ProvisionState, n.TargetProvisionState,
			n.PowerState, n.LastError)
	}
	log, err := os.ReadFile(s.Ironic.Vars["IRONIC_LOG"])
	if err != nil {
		return b.String()
	}
	var lines []string
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, id) && (strings.Contains(line, " ERROR ") || strings.Contains(line, " WARNING ")) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	for _, line := range lines[max(0, len(lines)-10):] {
		b.WriteString("\n    ")
		b.WriteString(line)
	}
	return b.String()
}

// deleteHost deletes a host and waits until it is gone with its HardwareData, its Ironic node and
// the finalizer on its Secret.
func (s *suite) deleteHost(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	h := s.get(t, ns, name)
	nodeID := h.Status.Provisioning.ID
	if err := s.c.Delete(context.Background(), h); err != nil {
		t.Fatalf("deleting host %s: %v", name, err)
	}
	start := time.Now()
	for {
		err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &metal3.BareMetalHost{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: still there %s after deletion; history:%s", name, timeout, formatHistory(s.rec.history(ns, name, start)))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%s: deleted after %s", name, time.Since(start).Round(100*time.Millisecond))
	if nodeID != "" && s.node(t, nodeID) != nil {
		t.Errorf("%s: Ironic node %s still exists after the host was deleted", name, nodeID)
	}
	err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &metal3.HardwareData{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: HardwareData still there after deletion (%v)", name, err)
	}
	var secret corev1.Secret
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: h.Spec.BMC.CredentialsName}, &secret); err != nil {
		t.Errorf("%s: reading the BMC Secret after deletion: %v", name, err)
	} else if slices.Contains(secret.Finalizers, metal3.SecretsFinalizer) {
		t.Errorf("%s: the BMC Secret keeps finalizer %s after the host is gone", name, metal3.SecretsFinalizer)
	}
}

// statusJSON is the host's whole status as JSON, for searching it for secrets.
func statusJSON(h *metal3.BareMetalHost) string {
	b, _ := json.Marshal(h.Status)
	return string(b)
}
