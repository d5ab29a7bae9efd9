package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestEventSubscriptionOnARegisteredNode: Redfish event subscriptions created, read and deleted on
// a manageable node through Ironic's vendor passthru, with bmcsim's EventService as the witness.
// Then what must not pass or must be waited for: a subscription removed on the BMC behind
// Ironic's back, an Id a BMC reset gave to another client's subscription, requests the BMC or
// Ironic refuses (their reason shown, the header's value never), a failing BMC (ErrUnavailable)
// and a locked node (ErrBusy, a short wait), and a node whose vendor interface has no
// subscriptions.
func TestEventSubscriptionOnARegisteredNode(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	ctx := context.Background()
	token := "tok-" + strings.ReplaceAll(host.NodeID, "-", "") // in the header only, never in an error
	sub := provisioner.EventSubscription{
		Destination: "https://events.example.test:8443/hooks/metal3",
		Context:     "ctx-" + host.Name,
		HTTPHeaders: map[string]string{"X-Auth-Token": token},
	}
	subs := func() []server.Subscription { return e.server(t, srv.Name).State.Subscriptions }

	// Create: an Id, and the BMC holds the subscription as asked.
	id := createWhenAvailable(t, p, host, sub)
	got := subs()
	if len(got) != 1 || got[0].ID != id || got[0].Destination != sub.Destination || got[0].Context != sub.Context || got[0].Protocol != "Redfish" ||
		!slices.Equal(got[0].HeaderNames, []string{"X-Auth-Token"}) {
		t.Fatalf("bmcsim's subscriptions after the create of %q: %+v; want one, with that Id, destination, context, protocol Redfish and the header", id, got)
	}
	t.Logf("created subscription %q; bmcsim holds %+v (header names only)", id, got[0])

	// What Ironic answers to the reads (logged for docs/ironic-notes.md): get_subscription keeps
	// only Id, Context, Protocol, Destination and EventTypes, never the headers.
	one := rawPassthru(t, p, host.NodeID, "get_subscription", map[string]string{"id": id})
	all := rawPassthru(t, p, host.NodeID, "get_all_subscriptions", nil)
	t.Logf("get_subscription answered %s", one)
	t.Logf("get_all_subscriptions answered %s", all)
	var read map[string]any
	if err := json.Unmarshal(one, &read); err != nil || read["Id"] != id || read["Destination"] != sub.Destination || read["Context"] != sub.Context {
		t.Fatalf("get_subscription answered %s (%v); want Id %q, the destination and the context", one, err, id)
	}
	if _, ok := read["HttpHeaders"]; ok || strings.Contains(string(one)+string(all), token) {
		t.Fatalf("the reads quote the headers: %s %s", one, all)
	}

	if !exists(t, p, host, id, sub) {
		t.Fatalf("EventSubscriptionExists(%q) right after the create: false; want true", id)
	}
	if exists(t, p, host, id+"0", sub) {
		t.Fatalf("EventSubscriptionExists(%q), an Id the BMC never gave: true; want false", id+"0")
	}
	// Found by destination and context (a create whose answer was lost), not by another context.
	if found, err := p.FindEventSubscriptions(ctx, host, sub); err != nil || len(found) != 1 || found[0] != id {
		t.Fatalf("FindEventSubscriptions: %v, %v; want [%s]", found, err, id)
	}
	other := sub
	other.Context = "another-context"
	if found, err := p.FindEventSubscriptions(ctx, host, other); err != nil || len(found) != 0 {
		t.Fatalf("FindEventSubscriptions with another context: %v, %v; want none", found, err)
	}
	if exists(t, p, host, id, other) {
		t.Fatalf("EventSubscriptionExists(%q) with another context: true; want false (the Id is another subscription's)", id)
	}

	// Delete: gone from the BMC and no longer seen; deleting again is no error.
	if err := p.DeleteEventSubscription(ctx, host, id); err != nil {
		t.Fatalf("deleting %q: %v", id, err)
	}
	if exists(t, p, host, id, sub) {
		t.Fatalf("EventSubscriptionExists(%q) after the delete: true; want false", id)
	}
	if got := subs(); len(got) != 0 {
		t.Fatalf("bmcsim's subscriptions after the delete: %+v; want none", got)
	}
	if err := p.DeleteEventSubscription(ctx, host, id); err != nil {
		t.Fatalf("deleting %q again, which the BMC no longer has: %v; want nil", id, err)
	}
	t.Logf("delete_subscription of a missing Id answered: %s", rawPassthruError(t, p, host.NodeID, "DELETE", "delete_subscription", map[string]string{"id": id}))
	t.Logf("get_subscription of a missing Id answered: %s", rawPassthruError(t, p, host.NodeID, "GET", "get_subscription", map[string]string{"id": id}))

	// Removed on the BMC behind Ironic's back (a BMC reset to its defaults, an administrator).
	id2 := createWhenAvailable(t, p, host, sub)
	if !exists(t, p, host, id2, sub) {
		t.Fatalf("EventSubscriptionExists(%q) right after the create: false; want true", id2)
	}
	if err := e.sim.Fleet.ByName(srv.Name).DeleteSubscription(id2); err != nil {
		t.Fatalf("removing subscription %q in bmcsim: %v", id2, err)
	}
	if exists(t, p, host, id2, sub) {
		t.Fatalf("EventSubscriptionExists(%q) once the BMC lost it: true; want false", id2)
	}
	if err := p.DeleteEventSubscription(ctx, host, id2); err != nil {
		t.Fatalf("deleting %q, which the BMC lost: %v; want nil", id2, err)
	}

	// A BMC reset to its defaults numbers subscriptions from 1 again (bmcsim as real BMCs):
	// another client's subscription takes the Id of ours, which no longer counts as ours.
	if err := e.control.FactoryReset(srv.Name); err != nil {
		t.Fatal(err)
	}
	id3 := createWhenAvailable(t, p, host, sub)
	if err := e.control.FactoryReset(srv.Name); err != nil {
		t.Fatal(err)
	}
	theirs, err := e.sim.Fleet.ByName(srv.Name).AddSubscription(server.Subscription{Destination: "https://other.example.test/events", Context: sub.Context})
	if err != nil || theirs.ID != id3 {
		t.Fatalf("another client's subscription after the reset: %+v, %v; want it to take Id %q", theirs, err, id3)
	}
	if exists(t, p, host, id3, sub) {
		t.Fatalf("EventSubscriptionExists(%q) once another client's subscription took the Id: true; want false", id3)
	}
	if err := e.sim.Fleet.ByName(srv.Name).DeleteSubscription(theirs.ID); err != nil {
		t.Fatal(err)
	}

	// Refusals: each says why, carries no header value and is not waited for; nothing is created.
	for _, tc := range []struct{ name, destination, why string }{
		// Ironic checks that Destination is a URI with a scheme and a host, nothing more.
		{"Ironic refuses", "events.example.test/hooks", "not a valid URI"},
		// bmcsim, as many BMCs, takes http and https destinations only: Ironic passes the
		// BMC's 400 on, quoting the whole payload, headers included.
		{"the BMC refuses", "ftp://events.example.test/hooks", "returned code 400"},
	} {
		bad := sub
		bad.Destination = tc.destination
		_, err := createOnce(t, p, host, bad)
		t.Logf("%s: %v", tc.name, err)
		if err == nil || isUnavailable(err) || errors.Is(err, provisioner.ErrNeedsRegistration) || !strings.Contains(err.Error(), tc.why) {
			t.Fatalf("%s (destination %s): %v; want an error saying %q, not waited for", tc.name, tc.destination, err, tc.why)
		}
		if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), host.NodeID) {
			t.Fatalf("%s: the error quotes the header's value or the node's UUID: %v", tc.name, err)
		}
		if got := subs(); len(got) != 0 {
			t.Fatalf("bmcsim's subscriptions after a refused create: %+v; want none", got)
		}
	}
	// Ironic's own answer to the BMC's refusal, for docs/ironic-notes.md (the token masked here).
	raw := rawPassthruError(t, p, host.NodeID, "POST", "create_subscription", map[string]any{
		"Destination": "ftp://events.example.test/hooks", "Context": sub.Context, "Protocol": "Redfish",
		"HttpHeaders": redfishHeaders(sub.HTTPHeaders),
	})
	t.Logf("create_subscription refused by the BMC answered (token echoed: %t): %s", strings.Contains(raw, token), strings.ReplaceAll(raw, token, "<token>"))

	// A BMC that answers 500 to everything. Ironic answers only once the BMC has, and sushy
	// retries every GET answered 5xx ten times, 3 s apart: over 30 s, the client's timeout here.
	// The create is waited for (a provisioner with a 5 s timeout, not to wait that long), and
	// Ironic holds the node until it gives up, then answers 500 with the BMC's answer: kept
	// failing until then, the BMC gets no subscription.
	if err := e.control.SetFaults(srv.Name, fault.Set{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.control.ClearFaults(srv.Name) })
	impatient := e.ironic.config()
	impatient.ClientTimeout = 5 * time.Second
	start := time.Now()
	_, ferr := newTestProvisioner(t, impatient).CreateEventSubscription(ctx, host, sub)
	t.Logf("create on a failing BMC: %v", ferr)
	if !isUnavailable(ferr) || !strings.Contains(ferr.Error(), "waiting for the BMC") || strings.Contains(ferr.Error(), token) {
		t.Fatalf("creating on a BMC answering 500: %v; want ErrUnavailable saying Ironic waits for the BMC, no header value", ferr)
	}
	poll.Within(t, 2*time.Minute, "Ironic to give up on the failing BMC and release the node", func() (bool, string) {
		p.watch.Forget(host.NodeID)
		_, n, err := p.getNode(ctx, host)
		return err == nil && n.Reservation == "", fmt.Sprintf("%v, reservation %q", err, n.Reservation)
	})
	t.Logf("Ironic held the node %s for the create on the failing BMC", time.Since(start).Round(time.Second))
	if err := e.control.ClearFaults(srv.Name); err != nil {
		t.Fatal(err)
	}
	if got := subs(); len(got) != 0 {
		t.Fatalf("bmcsim's subscriptions after the create on a failing BMC: %+v; want none", got)
	}

	// A BMC that holds all the subscriptions it can (bmcsim: 16) answers 409: refused, saying why.
	for range 16 {
		if _, err := e.sim.Fleet.ByName(srv.Name).AddSubscription(server.Subscription{Destination: "https://other.example.test/"}); err != nil {
			t.Fatal(err)
		}
	}
	_, full := createOnce(t, p, host, sub)
	t.Logf("create on a full BMC: %v", full)
	if full == nil || isUnavailable(full) || !strings.Contains(full.Error(), "returned code 409") || !strings.Contains(full.Error(), "at most 16") || strings.Contains(full.Error(), token) {
		t.Fatalf("creating on a BMC holding 16 subscriptions: %v; want the BMC's refusal (409, at most 16), not waited for, no header value", full)
	}
	for _, s := range subs() {
		if err := e.sim.Fleet.ByName(srv.Name).DeleteSubscription(s.ID); err != nil {
			t.Fatal(err)
		}
	}

	// A locked node. Read locked, nothing is sent (only the node's GET); sent on a read from
	// before the lock, Ironic answers 409 after its lock retries: both are waited for.
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, e, fmt.Sprintf(`UPDATE nodes SET reservation = 'c-1' WHERE uuid = '%s'`, host.NodeID))
	t.Cleanup(func() {
		_, _ = e.ironic.ExecSQL(fmt.Sprintf(`UPDATE nodes SET reservation = NULL WHERE uuid = '%s'`, host.NodeID))
	})
	p.watch.Forget(host.NodeID)
	var lerr error
	calls := callsDelta(p, func() { _, lerr = p.CreateEventSubscription(ctx, host, sub) })
	if !errors.Is(lerr, provisioner.ErrBusy) || !isUnavailable(lerr) || calls["eventsubscription"] != 1 {
		t.Fatalf("creating on a node read locked: %v, requests %v; want ErrBusy (and ErrUnavailable) after the node's GET alone", lerr, calls)
	}
	start = time.Now()
	_, lerr = p.createSubscription(ctx, s, n, host, sub, "creating on a locked node")
	t.Logf("create on a locked node: %v (after %s)", lerr, time.Since(start).Round(100*time.Millisecond))
	if !errors.Is(lerr, provisioner.ErrBusy) || !isUnavailable(lerr) || !strings.Contains(lerr.Error(), "locked") {
		t.Fatalf("creating on a locked node: %v; want ErrBusy (and ErrUnavailable) saying it is locked", lerr)
	}
	execSQL(t, e, fmt.Sprintf(`UPDATE nodes SET reservation = NULL WHERE uuid = '%s'`, host.NodeID))

	// A vendor interface without subscriptions (set behind the provisioner's back: the redfish
	// hardware type offers no-vendor too). The error names it.
	execSQL(t, e, fmt.Sprintf(`UPDATE nodes SET vendor_interface = 'no-vendor' WHERE uuid = '%s'`, host.NodeID))
	t.Cleanup(func() {
		_, _ = e.ironic.ExecSQL(fmt.Sprintf(`UPDATE nodes SET vendor_interface = 'redfish' WHERE uuid = '%s'`, host.NodeID))
	})
	p.watch.Forget(host.NodeID)
	_, verr := createOnce(t, p, host, sub)
	t.Logf("create with vendor interface no-vendor: %v", verr)
	if !errors.Is(verr, errNoEventSubscriptions) || !strings.Contains(verr.Error(), `"no-vendor"`) || strings.Contains(verr.Error(), token) {
		t.Fatalf("creating with vendor interface no-vendor: %v; want an error naming it", verr)
	}
	if got := subs(); len(got) != 0 {
		t.Fatalf("bmcsim's subscriptions at the end: %+v; want none", got)
	}
}

// createOnce creates the subscription, waiting out ErrBusy (a conductor's periodic task may hold a
// manageable node for a moment): any other outcome is the caller's to judge.
func createOnce(t *testing.T, p *Provisioner, host provisioner.Host, sub provisioner.EventSubscription) (string, error) {
	t.Helper()
	var id string
	var err error
	poll.Until(t, "the create to meet an unlocked node", func() (bool, string) {
		p.watch.Forget(host.NodeID)
		id, err = p.CreateEventSubscription(context.Background(), host, sub)
		return !errors.Is(err, provisioner.ErrBusy), fmt.Sprint(err)
	})
	return id, err
}

// createWhenAvailable creates the subscription and returns its Id, failing the test on an error.
func createWhenAvailable(t *testing.T, p *Provisioner, host provisioner.Host, sub provisioner.EventSubscription) string {
	t.Helper()
	id, err := createOnce(t, p, host, sub)
	if err != nil || id == "" {
		t.Fatalf("creating %s: id %q, %v", sub, id, err)
	}
	return id
}

// exists is EventSubscriptionExists, failing the test on an error.
func exists(t *testing.T, p *Provisioner, host provisioner.Host, id string, sub provisioner.EventSubscription) bool {
	t.Helper()
	ok, err := p.EventSubscriptionExists(context.Background(), host, id, sub)
	if err != nil {
		t.Fatalf("EventSubscriptionExists(%q): %v", id, err)
	}
	return ok
}

// rawPassthru is Ironic's answer to GET vendor_passthru?method=… as it came.
func rawPassthru(t *testing.T, p *Provisioner, nodeID, method string, body any) json.RawMessage {
	t.Helper()
	s, err := p.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	_, err = s.sc.Request(context.Background(), "GET", s.sc.ServiceURL("nodes", nodeID, "vendor_passthru")+"?method="+method,
		&gophercloud.RequestOpts{JSONBody: body, JSONResponse: &raw, OkCodes: []int{200}})
	if err != nil {
		t.Fatalf("GET vendor_passthru?method=%s: %v", method, err)
	}
	return raw
}

// rawPassthruError is the status and faultstring of a vendor passthru call that must fail.
func rawPassthruError(t *testing.T, p *Provisioner, nodeID, httpMethod, method string, body any) string {
	t.Helper()
	s, err := p.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.sc.Request(context.Background(), httpMethod, s.sc.ServiceURL("nodes", nodeID, "vendor_passthru")+"?method="+method,
		&gophercloud.RequestOpts{JSONBody: body, OkCodes: []int{200, 202, 204}})
	if err == nil {
		t.Fatalf("%s vendor_passthru?method=%s succeeded; want a failure", httpMethod, method)
	}
	return fmt.Sprintf("%d %s", statusOf(err), rawFault(err))
}
