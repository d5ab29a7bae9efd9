package ironic

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/statustext"
)

// Redfish event subscriptions (BMCEventSubscription) through the node's vendor passthru, as
// metal3 does it: POST /v1/nodes/{id}/vendor_passthru?method=create_subscription, DELETE
// ?method=delete_subscription with {"id"}, and GET ?method=get_all_subscriptions to tell whether
// the BMC still has one. Only the redfish vendor interface has these methods (and idrac-redfish,
// its subclass): the redfish and idrac hardware types, which every Redfish-family BMC address gets
// (internal/bmc). An ipmi node's (ipmitool, no-vendor) answers 400 "No handler for method …".
//
// What Ironic 39 does (drivers/modules/redfish/vendor.py, conductor/manager.py vendor_passthru,
// docs/ironic-notes.md):
//   - every call is synchronous: inside the API request the conductor takes the node's exclusive
//     lock (3 tries a second apart, then 409 NodeLocked), talks to the BMC and answers with what
//     it said. A locked node is a short wait, ErrBusy (this interface has no Working; it wraps
//     ErrUnavailable too), and nothing is sent while the node read shows a reservation: the
//     request would hold one of Ironic's ten API threads for 3 s to get that 409. Two
//     subscriptions of one host reconciled together meet each other's lock this way;
//   - create checks only shapes (Destination a URI with a scheme and a host, any scheme; Context
//     and Protocol strings; HttpHeaders a list; EventTypes, which metal3 and we leave to Ironic's
//     ["Alert"], among the EventService's) and answers 400 with the reason; the BMC judges the
//     rest (https only, Context length, how many subscriptions);
//   - a BMC failure is a RedfishError carrying sushy's text ("HTTP POST <url> returned code 400.
//     <Redfish code>: <message> Extended information: [...]", "Resource <url> not found", "Unable
//     to connect to <url>. …"): 500 for create and the reads, 404 for delete whatever the cause.
//     A failed create also quotes its whole payload, header values (tokens) included, and logs it
//     in Ironic's log: subscriptionFault cuts it out and masks every header value besides;
//   - a BMC that answers 5xx keeps the request much longer than one that refuses: sushy retries
//     every GET answered 5xx ten times, 3 s apart, so Ironic answers after about 31 s (measured
//     on bmcsim answering 500 to everything), beyond the client's default 30 s timeout, and holds
//     the node's lock until then. Such a timeout is reported as the BMC's failure, not Ironic's.
//
// A BMC that answered 4xx refused the request for good: the error says why and is not waited
// for. Any other BMC failure (5xx, no answer) is ErrUnavailable, like Ironic itself failing.

// The vendor passthru methods of Ironic's redfish vendor interface.
const (
	methodCreateSubscription = "create_subscription"
	methodDeleteSubscription = "delete_subscription"
	methodListSubscriptions  = "get_all_subscriptions"
	methodGetSubscription    = "get_subscription"
)

// errNodeLocked is wrapped by the errors for a node another request holds (a reservation, Ironic's
// 409 NodeLocked): the caller looks again in a few seconds, and nothing failed.
var errNodeLocked = fmt.Errorf("%w (%w)", provisioner.ErrBusy, provisioner.ErrUnavailable)

// errNoEventSubscriptions is wrapped by the errors for a node whose vendor interface has no
// subscription methods: no retry helps, the BMC address must change.
var errNoEventSubscriptions = fmt.Errorf("event subscriptions need a Redfish BMC address (Ironic's redfish or idrac-redfish vendor interface): %w",
	provisioner.ErrEventSubscriptionUnsupported)

// CreateEventSubscription creates the subscription on the host's BMC and returns the BMC's Id of it.
func (p *Provisioner) CreateEventSubscription(ctx context.Context, host provisioner.Host, sub provisioner.EventSubscription) (string, error) {
	ctx = withOp(ctx, "eventsubscription")
	doing := fmt.Sprintf("creating an event subscription on the BMC of host %s/%s", host.Namespace, host.Name)
	s, n, err := p.subscriptionNode(ctx, host, doing)
	if err != nil {
		return "", err
	}
	return p.createSubscription(ctx, s, n, host, sub, doing)
}

// createSubscription sends the create to the node as read (a test gives it a node read before a
// lock, to see Ironic's 409).
func (p *Provisioner) createSubscription(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, sub provisioner.EventSubscription, doing string) (string, error) {
	p.logger(ctx).Info("Creating a Redfish event subscription", "node", n.UUID,
		"destination", statustext.Redact(sub.Destination), "headers", slices.Sorted(maps.Keys(sub.HTTPHeaders)))
	var created nodes.SubscriptionVendorPassthru
	err := nodes.CreateSubscription(ctx, s.sc, n.UUID, nodes.CallVendorPassthruOpts{Method: methodCreateSubscription},
		nodes.CreateSubscriptionOpts{
			Destination: sub.Destination, Context: sub.Context, Protocol: "Redfish", HttpHeaders: redfishHeaders(sub.HTTPHeaders),
		}).ExtractInto(&created)
	if err != nil {
		return "", p.subscriptionError(ctx, s, n, err, doing, subscriptionSecrets(host, sub)...)
	}
	if created.Id == "" {
		return "", fmt.Errorf("%s: Ironic's answer names no subscription Id", doing)
	}
	return created.Id, nil
}

// EventSubscriptionExists reports whether the BMC lists the subscription and it still has sub's
// destination and context. get_all_subscriptions first: a missing member is then absent from a
// list read without error, where get_subscription answers 500 with sushy's "Resource … not
// found", as for any failure. Then get_subscription of id alone (the list names only Ids): a BMC
// reset to its defaults numbers the subscriptions made after it from the start again, and may
// have given id to another client's, which the caller must neither keep nor delete as its own.
func (p *Provisioner) EventSubscriptionExists(ctx context.Context, host provisioner.Host, id string, sub provisioner.EventSubscription) (bool, error) {
	ctx = withOp(ctx, "eventsubscription")
	doing := fmt.Sprintf("reading the event subscriptions of the BMC of host %s/%s", host.Namespace, host.Name)
	if id == "" {
		return false, fmt.Errorf("%s: no subscription id given", doing)
	}
	s, n, err := p.subscriptionNode(ctx, host, doing)
	if err != nil {
		return false, err
	}
	ids, err := p.listSubscriptions(ctx, s, n, host, doing)
	if err != nil || !slices.Contains(ids, id) {
		return false, err
	}
	got, err := p.getSubscription(ctx, s, n, host, sub, id, doing)
	if err != nil {
		return false, err
	}
	return sameSubscription(got, sub), nil
}

// getSubscription reads one subscription of the BMC (Id, Destination, Context; never its headers).
func (p *Provisioner) getSubscription(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host,
	sub provisioner.EventSubscription, id, doing string) (nodes.SubscriptionVendorPassthru, error) {
	var got nodes.SubscriptionVendorPassthru
	err := nodes.GetSubscription(ctx, s.sc, n.UUID, nodes.CallVendorPassthruOpts{Method: methodGetSubscription},
		nodes.GetSubscriptionOpts{Id: id}).ExtractInto(&got)
	if err != nil {
		return got, p.subscriptionError(ctx, s, n, err, doing, subscriptionSecrets(host, sub)...)
	}
	return got, nil
}

// FindEventSubscriptions lists the BMC's subscriptions and reads each (get_subscription: the list
// names only their Ids) for the ones with sub's destination and context. Used before a create
// only, so that a create whose answer was lost (a status write that failed, a BMC slower than the
// client's timeout) is taken over instead of doubled.
func (p *Provisioner) FindEventSubscriptions(ctx context.Context, host provisioner.Host, sub provisioner.EventSubscription) ([]string, error) {
	ctx = withOp(ctx, "eventsubscription")
	doing := fmt.Sprintf("reading the event subscriptions of the BMC of host %s/%s", host.Namespace, host.Name)
	s, n, err := p.subscriptionNode(ctx, host, doing)
	if err != nil {
		return nil, err
	}
	ids, err := p.listSubscriptions(ctx, s, n, host, doing)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, id := range ids {
		got, err := p.getSubscription(ctx, s, n, host, sub, id, doing)
		if err != nil {
			if errors.Is(err, provisioner.ErrUnavailable) || errors.Is(err, provisioner.ErrNeedsRegistration) {
				return nil, err
			}
			// Deleted since the list (another object's deletion), or not readable with this
			// account: not one to take over, and no reason to hold the create.
			p.logger(ctx).Info("Skipping an event subscription the BMC did not let us read", "node", n.UUID, "subscription", id, "reason", err.Error())
			continue
		}
		if sameSubscription(got, sub) {
			found = append(found, id)
		}
	}
	return found, nil
}

// sameSubscription: the BMC's subscription got is sub, as far as a BMC keeps it. Some BMCs store
// the destination in their own spelling (scheme and host lowercased, the default port or a
// trailing slash dropped or added) and some keep no context: compared exactly, such a BMC's
// subscription would be taken for lost at every check and created again each hour until the BMC
// is full. Another client's subscription to the same destination is the same events anyway.
func sameSubscription(got nodes.SubscriptionVendorPassthru, sub provisioner.EventSubscription) bool {
	return sameDestination(got.Destination, sub.Destination) && (got.Context == sub.Context || got.Context == "")
}

func sameDestination(a, b string) bool {
	if a == b {
		return true
	}
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	norm := func(u *url.URL) string {
		scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
		if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
			port = ""
		}
		if port != "" {
			host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host + strings.TrimSuffix(u.EscapedPath(), "/") + "?" + u.RawQuery
	}
	return norm(ua) == norm(ub)
}

// DeleteEventSubscription removes the subscription; one the BMC no longer has is not an error.
func (p *Provisioner) DeleteEventSubscription(ctx context.Context, host provisioner.Host, id string) error {
	ctx = withOp(ctx, "eventsubscription")
	doing := fmt.Sprintf("deleting event subscription %q on the BMC of host %s/%s", id, host.Namespace, host.Name)
	if id == "" {
		return fmt.Errorf("%s: no subscription id given", doing)
	}
	s, n, err := p.subscriptionNode(ctx, host, doing)
	if err != nil {
		return err
	}
	p.logger(ctx).Info("Deleting a Redfish event subscription", "node", n.UUID, "subscription", id)
	err = nodes.DeleteSubscription(ctx, s.sc, n.UUID, nodes.CallVendorPassthruOpts{Method: methodDeleteSubscription},
		nodes.DeleteSubscriptionOpts{Id: id}).ExtractErr()
	if err == nil {
		return nil
	}
	if notFound(err) && redfishFault(rawFault(err)) {
		// Ironic answers 404 for any BMC failure of a delete (an unreachable BMC too), so the
		// BMC's list decides whether the subscription is gone.
		ids, lerr := p.listSubscriptions(ctx, s, n, host, doing)
		if lerr != nil {
			return lerr
		}
		if !slices.Contains(ids, id) {
			p.logger(ctx).Info("The BMC no longer has the event subscription", "node", n.UUID, "subscription", id)
			return nil
		}
	}
	return p.subscriptionError(ctx, s, n, err, doing, host.BMCCredentials.Password)
}

// listSubscriptions returns the Ids of the subscriptions the BMC lists: the last segment of each
// member's @odata.id, which is how Ironic itself addresses them (collection path + "/" + id).
func (p *Provisioner) listSubscriptions(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, doing string) ([]string, error) {
	var collection struct {
		Members []struct {
			ID string `json:"@odata.id"`
		} `json:"Members"`
	}
	err := nodes.GetAllSubscriptions(ctx, s.sc, n.UUID, nodes.CallVendorPassthruOpts{Method: methodListSubscriptions}).ExtractInto(&collection)
	if err != nil {
		return nil, p.subscriptionError(ctx, s, n, err, doing, host.BMCCredentials.Password)
	}
	ids := make([]string, 0, len(collection.Members))
	for _, m := range collection.Members {
		path := strings.TrimSuffix(m.ID, "/")
		ids = append(ids, path[strings.LastIndex(path, "/")+1:])
	}
	return ids, nil
}

// subscriptionNode checks that the host's BMC type can have subscriptions (before any request:
// an ipmi node's vendor interface has none) and reads its node, refusing to send while a
// conductor holds it.
func (p *Provisioner) subscriptionNode(ctx context.Context, host provisioner.Host, doing string) (*session, *nodes.Node, error) {
	access, err := parseAccess(host)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", doing, err)
	}
	if access.Driver == bmc.DriverIPMI {
		return nil, nil, fmt.Errorf("%s: its BMC address is of type %s, which Ironic drives with the ipmi hardware type, whose vendor interfaces (ipmitool, no-vendor) have none: %w",
			doing, access.Type, errNoEventSubscriptions)
	}
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return nil, nil, err
	}
	if n.Reservation != "" {
		return nil, nil, fmt.Errorf("%s: Ironic node %s is locked by %s: %w", doing, n.UUID, n.Reservation, errNodeLocked)
	}
	return s, n, nil
}

// subscriptionError turns a vendor passthru failure into the interface's errors (see the top of
// the file). The text is Ironic's, through subscriptionFault: never the gophercloud error itself,
// whose message quotes the answer's body, payload and header values included.
func (p *Provisioner) subscriptionError(ctx context.Context, s *session, n *nodes.Node, err error, doing string, secrets ...string) error {
	status := statusOf(err)
	if status == 0 && timedOut(err) {
		// Ironic answers a passthru once the BMC has: a BMC that fails keeps the request
		// (and the node's lock) for a long time, as sushy retries each GET answered 5xx ten
		// times, 3 s apart. Ironic's own failures are quick.
		return fmt.Errorf("%s: %w: Ironic did not answer in time: its conductor was still waiting for the BMC (failing or slow) of node %s, which it keeps locked until then",
			doing, provisioner.ErrUnavailable, n.UUID)
	}
	if status == 0 {
		return classifyError(err, doing) // no answer: ErrUnavailable, or the caller gave up
	}
	raw := rawFault(err)
	fault := subscriptionFault(raw, n.UUID, secrets...)
	switch {
	case status == http.StatusConflict:
		return fmt.Errorf("%s: Ironic node %s is locked (%s): %w", doing, n.UUID, fault, errNodeLocked)
	case status == http.StatusNotFound && !redfishFault(raw):
		return fmt.Errorf("%s: Ironic node %s is gone: %w", doing, n.UUID, provisioner.ErrNeedsRegistration)
	case status == http.StatusBadRequest && strings.Contains(raw, "No handler for method"):
		iface := "unknown"
		if full, ferr := p.fetchNode(ctx, s, n.UUID); ferr == nil {
			iface = full.VendorInterface
		}
		return fmt.Errorf("%s: Ironic node %s has vendor interface %q, which has no subscription methods (Ironic: %s): %w",
			doing, n.UUID, iface, fault, errNoEventSubscriptions)
	case redfishFault(raw):
		if bmcUnavailable(raw) {
			return fmt.Errorf("%s: %w: the BMC failed: %s", doing, provisioner.ErrUnavailable, fault)
		}
		return fmt.Errorf("%s: %w: %s", doing, provisioner.ErrBMCRefused, fault)
	case status == http.StatusBadRequest:
		return fmt.Errorf("%s: Ironic refused: %s", doing, fault)
	case status >= http.StatusInternalServerError:
		return fmt.Errorf("%s: %w: Ironic answered %d: %s", doing, provisioner.ErrUnavailable, status, fault)
	}
	return fmt.Errorf("%s: Ironic answered %d: %s", doing, status, fault)
}

// timedOut reports a request that got no answer in time (the client's timeout or the caller's
// deadline), as opposed to one that could not be sent.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// rawFault is Ironic's faultstring in an error answer, unsanitized ("" for no answer).
func rawFault(err error) string {
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		return rawFaultString(ue.Body)
	}
	return ""
}

// redfishFault reports an error Ironic's redfish driver raised (RedfishError, its
// RedfishConnectionError), as opposed to one of Ironic's own (NodeNotFound, NodeLocked, …).
func redfishFault(raw string) bool { return strings.HasPrefix(raw, "Redfish ") }

var bmcStatusPattern = regexp.MustCompile(`returned code (\d{3})\b`)

// bmcUnavailable reports a Redfish failure worth waiting out: the BMC answered 5xx, 408 or 429
// (busy: a request timeout, too many requests), or could not be reached. Another 4xx answer, or
// anything else (no EventService, an answer sushy could not read), is the BMC's refusal.
func bmcUnavailable(raw string) bool {
	if m := bmcStatusPattern.FindStringSubmatch(raw); m != nil {
		code, _ := strconv.Atoi(m[1])
		return code >= http.StatusInternalServerError || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
	}
	return strings.HasPrefix(raw, "Redfish connection failed") || strings.Contains(raw, "Unable to connect to")
}

const (
	redfishErrorPrefix = "Redfish exception occurred. Error: "
	payloadMarker      = "Subscription payload: "
)

// ironicSentence is what the vendor methods say before sushy's text, once the node's mention is
// gone ("Failed to create subscription. Error: ", "Redfish delete_subscription failed for
// subscription 1. Error: "): the caller says what it was doing already.
var ironicSentence = regexp.MustCompile(`^(?:Failed to create subscription|Redfish (?:delete_subscription|get_subscriptions?) failed[^.]*)\. Error: `)

// subscriptionFault makes Ironic's text safe and short for status: the payload a failed create
// quotes cut out (it holds the header values), Ironic's generic prefix and the node's UUID
// dropped (the host is named already), then every secret masked (the header values again, should
// another message ever quote them, and the BMC password) and the package's sanitize.
func subscriptionFault(raw, nodeID string, secrets ...string) string {
	msg := cutPayload(raw)
	msg = strings.TrimPrefix(msg, redfishErrorPrefix)
	msg = nodeMention.ReplaceAllString(msg, "")
	msg = ironicSentence.ReplaceAllString(msg, "")
	if nodeID != "" {
		msg = strings.ReplaceAll(msg, nodeID, "<node>")
	}
	return sanitize(msg, secrets...)
}

// cutPayload removes "Subscription payload: {…}. " (a Python dict's repr) from a failed create's
// text. The dict ends at its matching brace, found outside quoted strings (repr quotes with ' or
// ", escaping with a backslash); should it not end, everything from the marker goes: nothing of
// it may remain.
func cutPayload(msg string) string {
	i := strings.Index(msg, payloadMarker)
	if i < 0 {
		return msg
	}
	rest := msg[i+len(payloadMarker):]
	end := -1
	if rest != "" && (rest[0] == '{' || rest[0] == '[') { // else the payload is not a dict
		end = closing(rest, 0)
	}
	if end < 0 {
		return strings.TrimRight(msg[:i], " ")
	}
	return msg[:i] + strings.TrimLeft(strings.TrimPrefix(rest[end:], "."), " ")
}

// redfishHeaders is the Redfish form of the headers, one object per header as metal3 sends them
// ([{"X-Auth": "…"}]), in name order so that the request is the same on every call.
func redfishHeaders(h map[string]string) []map[string]string {
	out := make([]map[string]string, 0, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		out = append(out, map[string]string{name: h[name]})
	}
	return out
}

// subscriptionSecrets are the values no error may show: the BMC password and the header values.
func subscriptionSecrets(host provisioner.Host, sub provisioner.EventSubscription) []string {
	return append([]string{host.BMCCredentials.Password}, slices.Collect(maps.Values(sub.HTTPHeaders))...)
}
