package server

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
)

// maxSubscriptions bounds the event subscriptions per BMC, as real BMCs do.
const maxSubscriptions = 16

// EventTypes are the event types a subscription may ask for.
var EventTypes = []string{"StatusChange", "ResourceUpdated", "ResourceAdded", "ResourceRemoved", "Alert"}

// AddSubscription records an event subscription. bmcsim stores subscriptions and serves them back;
// it does not deliver events.
func (s *Server) AddSubscription(sub Subscription) (Subscription, error) {
	u, err := url.Parse(sub.Destination)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Subscription{}, invalid("Destination %q is not an http or https URL", sub.Destination)
	}
	if sub.Protocol == "" {
		sub.Protocol = "Redfish"
	}
	if sub.Protocol != "Redfish" {
		return Subscription{}, invalid("Protocol %q is not supported (Redfish)", sub.Protocol)
	}
	for _, t := range sub.EventTypes {
		if !slices.Contains(EventTypes, t) {
			return Subscription{}, invalid("EventTypes value %q is not one of %v", t, EventTypes)
		}
	}
	var err2 error
	s.update(func(st *State) bool {
		if len(st.Subscriptions) >= maxSubscriptions {
			err2 = fmt.Errorf("%w: the BMC holds at most %d subscriptions", ErrConflict, maxSubscriptions)
			return false
		}
		sub.ID = strconv.Itoa(st.NextSub)
		st.NextSub++
		st.Subscriptions = append(st.Subscriptions, sub)
		return true
	})
	return sub, err2
}

// DeleteSubscription removes a subscription.
func (s *Server) DeleteSubscription(id string) error {
	var found bool
	s.update(func(st *State) bool {
		n := len(st.Subscriptions)
		st.Subscriptions = slices.DeleteFunc(st.Subscriptions, func(x Subscription) bool { return x.ID == id })
		found = len(st.Subscriptions) != n
		return found
	})
	if !found {
		return fmt.Errorf("%w: subscription %s", ErrNotFound, id)
	}
	return nil
}
