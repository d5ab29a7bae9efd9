package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

const testToken = "tok-5f2b9c0e"

// refusedCreate is Ironic 39's faultstring for a create the BMC refused, as
// TestEventSubscriptionOnARegisteredNode logs it (the payload quotes the header's value).
const refusedCreate = "Redfish exception occurred. Error: Failed to create subscription on node " + testNodeID +
	". Subscription payload: {'Destination': 'ftp://events.example.test/hooks', 'Protocol': 'Redfish', 'Context': 'ctx-a', " +
	"'EventTypes': ['Alert'], 'HttpHeaders': [{'X-Auth-Token': '" + testToken + "'}]}. Error: HTTP POST " +
	"http://127.0.0.1:35485/redfish/v1/EventService/Subscriptions returned code 400. Base.1.18.GeneralError: invalid request: " +
	`Destination "ftp://events.example.test/hooks" is not an http or https URL Extended information: [{'@odata.type': ` +
	`'#Message.v1_2_0.Message', 'Message': 'invalid request', 'MessageId': 'Base.1.18.GeneralError', 'Severity': 'Warning'}]`

func TestEventSubscriptionFault(t *testing.T) {
	tests := map[string]struct{ raw, want string }{
		"create refused by the BMC: payload cut, node and Ironic's sentences dropped": {
			raw:  refusedCreate,
			want: `HTTP POST http://127.0.0.1:35485/redfish/v1/EventService/Subscriptions returned code 400. Base.1.18.GeneralError: invalid request: Destination "ftp://events.example.test/hooks" is not an http or https URL`,
		},
		"a payload whose strings hold quotes, braces and the marker's end": {
			raw: "Redfish exception occurred. Error: Failed to create subscription on node " + testNodeID +
				`. Subscription payload: {'Destination': 'https://e/}{', 'Context': "it's }. Error: x", 'HttpHeaders': [{'A': 'b\'}]` + testToken + `'}]}. Error: HTTP POST https://bmc/redfish/v1/EventService/Subscriptions returned code 409. Base.1.18.ResourceInUse: full`,
			want: "HTTP POST https://bmc/redfish/v1/EventService/Subscriptions returned code 409. Base.1.18.ResourceInUse: full",
		},
		"a payload that does not end: everything from it goes": {
			raw:  "Redfish exception occurred. Error: Failed to create subscription on node " + testNodeID + ". Subscription payload: {'HttpHeaders': [{'X': '" + testToken,
			want: "Failed to create subscription.",
		},
		"a delete of a subscription the BMC does not have": {
			raw:  "Redfish exception occurred. Error: Redfish delete_subscription failed for subscription 1 on node " + testNodeID + ". Error: Resource http://127.0.0.1:35485/redfish/v1/EventService/Subscriptions/1 not found",
			want: "Resource http://127.0.0.1:35485/redfish/v1/EventService/Subscriptions/1 not found",
		},
		"a connection failure keeps sushy's words": {
			raw:  "Redfish connection failed for node " + testNodeID + ": Unable to connect to https://admin:hunter22@bmc/redfish/v1. Error: timed out",
			want: "Redfish connection failed: Unable to connect to https://***@bmc/redfish/v1. Error: timed out",
		},
		"Ironic's own refusal": {
			raw:  "Destination events.example.test/hooks?token=abc is not a valid URI",
			want: "Destination events.example.test/hooks?token=*** is not a valid URI",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := subscriptionFault(tc.raw, testNodeID, "hunter22", testToken)
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if strings.Contains(got, testToken) || strings.Contains(got, "hunter22") {
				t.Errorf("%q quotes a secret", got)
			}
		})
	}
}

func TestEventSubscriptionBMCUnavailable(t *testing.T) {
	for raw, want := range map[string]bool{
		refusedCreate: false,
		"Redfish exception occurred. Error: HTTP GET http://bmc/redfish/v1/EventService returned code 500. Base.1.18.InternalError: injected": true,
		"Redfish exception occurred. Error: HTTP POST http://bmc/x returned code 409. Base.1.18.ResourceInUse: full":                          false,
		"Redfish exception occurred. Error: HTTP GET http://bmc/redfish/v1/EventService/Subscriptions returned code 429. Too many requests":   true,
		"Redfish exception occurred. Error: HTTP GET http://bmc/redfish/v1/EventService/Subscriptions returned code 408. Request timeout":     true,
		"Redfish connection failed for node x: Unable to connect to https://bmc/redfish/v1. Error: refused":                                   true,
		"Redfish exception occurred. Error: The attribute EventService is missing from the resource /redfish/v1":                              false,
	} {
		if got := bmcUnavailable(raw); got != want {
			t.Errorf("bmcUnavailable(%.90q…) = %t, want %t", raw, got, want)
		}
	}
}

// ironicAnswer is an error answer as gophercloud returns it, with Ironic's body.
func ironicAnswer(status int, fault string) error {
	inner, _ := json.Marshal(map[string]any{"faultcode": "Server", "faultstring": fault, "debuginfo": nil})
	body, _ := json.Marshal(map[string]string{"error_message": string(inner)})
	return gophercloud.ErrUnexpectedResponseCode{Actual: status, Body: body}
}

// TestEventSubscriptionError: which answers are waited for (ErrUnavailable), which mean the node is
// gone, and which are refusals; none quotes a header value.
func TestEventSubscriptionError(t *testing.T) {
	timeout := &url.Error{Op: "Post", URL: "http://ironic/v1/nodes/x/vendor_passthru", Err: context.DeadlineExceeded}
	tests := map[string]struct {
		err         error
		unavailable bool
		busy        bool // another request holds the node (ErrBusy): a short wait, no failure
		gone        bool
		refused     bool // the BMC's refusal (ErrBMCRefused): a deletion with no id may go
		says        string
	}{
		"node locked":               {err: ironicAnswer(409, "Node "+testNodeID+" is locked by host c-1, please retry after the current operation is completed."), unavailable: true, busy: true, says: "locked by host c-1"},
		"node gone":                 {err: ironicAnswer(404, "Node "+testNodeID+" could not be found."), gone: true, says: "is gone"},
		"Ironic refuses":            {err: ironicAnswer(400, "Destination x is not a valid URI"), says: "Ironic refused: Destination x is not a valid URI"},
		"the BMC refuses":           {err: ironicAnswer(500, refusedCreate), refused: true, says: "the BMC refused: HTTP POST"},
		"the BMC fails":             {err: ironicAnswer(500, "Redfish exception occurred. Error: HTTP GET http://bmc/redfish/v1/EventService returned code 500. Base.1.18.InternalError: x"), unavailable: true, says: "the BMC failed: HTTP GET"},
		"Ironic fails":              {err: ironicAnswer(503, "database is locked"), unavailable: true, says: "Ironic answered 503"},
		"no answer in time":         {err: timeout, unavailable: true, says: "waiting for the BMC"},
		"Ironic cannot be reached":  {err: &url.Error{Op: "Post", URL: "http://ironic/v1", Err: errors.New("connection refused")}, unavailable: true},
		"a header value in a fault": {err: ironicAnswer(400, "HttpHeaders [{'X-Auth-Token': '"+testToken+"'}] is not a list of headers"), says: "Ironic refused"},
	}
	p := &Provisioner{}
	n := &nodes.Node{UUID: testNodeID}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := p.subscriptionError(context.Background(), nil, n, tc.err, "creating", "hunter22", testToken)
			if errors.Is(err, provisioner.ErrUnavailable) != tc.unavailable || errors.Is(err, provisioner.ErrNeedsRegistration) != tc.gone {
				t.Errorf("%v: unavailable %t, needs registration %t; want %t, %t", err, errors.Is(err, provisioner.ErrUnavailable),
					errors.Is(err, provisioner.ErrNeedsRegistration), tc.unavailable, tc.gone)
			}
			if errors.Is(err, provisioner.ErrBusy) != tc.busy {
				t.Errorf("%v: busy %t, want %t", err, errors.Is(err, provisioner.ErrBusy), tc.busy)
			}
			if errors.Is(err, provisioner.ErrBMCRefused) != tc.refused {
				t.Errorf("%v: the BMC's refusal %t, want %t", err, errors.Is(err, provisioner.ErrBMCRefused), tc.refused)
			}
			if !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), testToken) {
				t.Errorf("%v: want it to say %q and not to quote the header's value", err, tc.says)
			}
		})
	}
}

func TestEventSubscriptionHeaders(t *testing.T) {
	got := redfishHeaders(map[string]string{"X-B": "2", "X-A": "1"})
	want := []map[string]string{{"X-A": "1"}, {"X-B": "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v (one object per header, by name)", got, want)
	}
	if got := redfishHeaders(nil); len(got) != 0 {
		t.Errorf("no headers: got %v, want none (left out of the request)", got)
	}
}

// TestEventSubscriptionNeedsARedfishBMC: an IPMI host is refused before any request, naming why;
// a Redfish-family one goes on to Ironic (here unreachable: waited for).
func TestEventSubscriptionNeedsARedfishBMC(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoint = "http://127.0.0.1:1/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: testNodeID}
	for _, address := range []string{"ipmi://10.0.0.1", "10.0.0.1:623", "libvirt://10.0.0.1"} {
		host.BMCAddress = address
		_, err := p.CreateEventSubscription(context.Background(), host, provisioner.EventSubscription{Destination: "https://e/"})
		if !errors.Is(err, errNoEventSubscriptions) || !strings.Contains(err.Error(), "ipmi hardware type") {
			t.Errorf("%s: %v; want an error saying the ipmi hardware type has no event subscriptions", address, err)
		}
		if _, err := p.EventSubscriptionExists(context.Background(), host, "1", provisioner.EventSubscription{Destination: "https://e/"}); !errors.Is(err, errNoEventSubscriptions) {
			t.Errorf("%s: exists: %v; want the same refusal", address, err)
		}
	}
	if calls := p.Calls(); len(calls) != 0 {
		t.Errorf("requests sent for IPMI hosts: %v; want none", calls)
	}
	host.BMCAddress = "idrac-virtualmedia://10.0.0.1/redfish/v1/Systems/System.Embedded.1"
	if err := p.DeleteEventSubscription(context.Background(), host, "1"); !errors.Is(err, provisioner.ErrUnavailable) {
		t.Errorf("idrac-virtualmedia with Ironic unreachable: %v; want ErrUnavailable (the address is accepted)", err)
	}
}

// TestSameSubscription: a BMC's own spelling of the destination, or a context it does not keep, is
// still the subscription asked for; another destination, path or context is not.
func TestSameSubscription(t *testing.T) {
	want := provisioner.EventSubscription{Destination: "https://Events.example.com:443/hook/", Context: "ctx"}
	for dest, same := range map[string]bool{
		"https://Events.example.com:443/hook/": true,
		"https://events.example.com/hook":      true,
		"HTTPS://EVENTS.EXAMPLE.COM/hook/":     true,
		"https://events.example.com:8443/hook": false,
		"https://events.example.com/other":     false,
		"http://events.example.com/hook":       false,
		"https://other.example.com/hook":       false,
		"https://events.example.com/hook?x=1":  false,
	} {
		got := nodes.SubscriptionVendorPassthru{Destination: dest, Context: "ctx"}
		if sameSubscription(got, want) != same {
			t.Errorf("destination %q: same %t, want %t", dest, !same, same)
		}
	}
	for ctx, same := range map[string]bool{"ctx": true, "": true, "other": false} {
		got := nodes.SubscriptionVendorPassthru{Destination: want.Destination, Context: ctx}
		if sameSubscription(got, want) != same {
			t.Errorf("context %q: same %t, want %t", ctx, !same, same)
		}
	}
}
