package redfish

import (
	"net/http"
	"slices"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

const (
	eventServicePath  = "/redfish/v1/EventService"
	subscriptionsPath = eventServicePath + "/Subscriptions"
)

func (svc *Service) eventRoutes() {
	svc.route("GET "+eventServicePath, false, func(q *request) {
		q.json(http.StatusOK, M{
			"@odata.id":                    eventServicePath,
			"@odata.type":                  "#EventService.v1_10_0.EventService",
			"Id":                           "EventService",
			"Name":                         "Event Service",
			"ServiceEnabled":               true,
			"DeliveryRetryAttempts":        3,
			"DeliveryRetryIntervalSeconds": 60,
			"EventTypesForSubscription":    server.EventTypes,
			"Status":                       statusOK,
			"Subscriptions":                ref(subscriptionsPath),
			"Actions": M{"#EventService.SubmitTestEvent": M{
				"target": eventServicePath + "/Actions/EventService.SubmitTestEvent",
			}},
		})
	})
	svc.route("POST "+eventServicePath+"/Actions/EventService.SubmitTestEvent", false, func(q *request) {
		var body map[string]any
		if q.decode(&body, true) {
			q.noContent()
		}
	})
	svc.route("GET "+subscriptionsPath, false, func(q *request) {
		var members []string
		q.srv.View(func(st *server.State) {
			for _, s := range st.Subscriptions {
				members = append(members, subscriptionsPath+"/"+s.ID)
			}
		})
		q.json(http.StatusOK, collection(subscriptionsPath, "#EventDestinationCollection.EventDestinationCollection", "Event Subscriptions Collection", members))
	})
	svc.route("POST "+subscriptionsPath, false, func(q *request) {
		var body struct {
			Destination string
			Context     string
			Protocol    string
			EventTypes  []string
			HttpHeaders []map[string]string //nolint:revive // Redfish property name
		}
		if !q.decode(&body, false) {
			return
		}
		if body.Destination == "" {
			q.error(http.StatusBadRequest, "PropertyMissing", "The property Destination is a required property and must be included in the request.", "Destination")
			return
		}
		var names []string
		for _, h := range body.HttpHeaders {
			for name := range h {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		sub, err := q.srv.AddSubscription(server.Subscription{
			Destination: body.Destination, Context: body.Context, Protocol: body.Protocol, EventTypes: body.EventTypes,
			HeaderNames: names,
		})
		if err != nil {
			q.fail(err)
			return
		}
		q.w.Header().Set("Location", subscriptionsPath+"/"+sub.ID)
		q.json(http.StatusCreated, subscriptionBody(sub))
	})
	svc.route("GET "+subscriptionsPath+"/{id}", false, func(q *request) {
		var found *server.Subscription
		q.srv.View(func(st *server.State) {
			for _, s := range st.Subscriptions {
				if s.ID == q.r.PathValue("id") {
					found = &s
				}
			}
		})
		if found == nil {
			q.notFound()
			return
		}
		q.json(http.StatusOK, subscriptionBody(*found))
	})
	svc.route("DELETE "+subscriptionsPath+"/{id}", false, func(q *request) {
		if err := q.srv.DeleteSubscription(q.r.PathValue("id")); err != nil {
			q.fail(err)
			return
		}
		q.noContent()
	})
}

// subscriptionBody never includes HttpHeaders: they may carry credentials, and Redfish requires
// them to read back as null.
func subscriptionBody(s server.Subscription) M {
	types := s.EventTypes
	if types == nil {
		types = []string{}
	}
	return M{
		"@odata.id":        subscriptionsPath + "/" + s.ID,
		"@odata.type":      "#EventDestination.v1_14_0.EventDestination",
		"Id":               s.ID,
		"Name":             "Event Subscription " + s.ID,
		"Destination":      s.Destination,
		"Context":          s.Context,
		"Protocol":         s.Protocol,
		"EventTypes":       types,
		"SubscriptionType": "RedfishEvent",
		"HttpHeaders":      nil,
		"Status":           statusOK,
	}
}
