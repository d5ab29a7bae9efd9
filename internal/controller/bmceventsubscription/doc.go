// Package bmceventsubscription is the BMCEventSubscription controller: a BMCEventSubscription
// (metal3.io/v1alpha1) asks the BMC of a BareMetalHost (spec.hostName, same namespace) to post its
// Redfish events to spec.destination, with spec.context and the HTTP headers of the Secret
// spec.httpHeadersRef (each key a header). The provisioner creates it on the BMC (Ironic's redfish
// vendor passthru) once the host is registered; status.subscriptionID is the BMC's identifier.
//
// What it does beyond metal3's controller: it checks every Resync that the BMC still has the
// subscription, its id still with this one's destination and context (a BMC reset may give the id
// to another client's, which is then neither kept nor deleted), and creates it again when a BMC
// reset lost it (metal3 created it once: events then stopped for good, silently); a node another
// request holds is waited out in seconds, with nothing said; a changed headers Secret (a rotated token) re-creates it with the
// new headers (metal3 kept the old ones), a change of the Secret's metadata alone does not; it is
// woken by the named host's changes (metal3's watch enqueued the host's own name, so a subscription
// waiting for its host was retried every 10 minutes); its errors name the field (a missing headers
// Secret, a host that does not exist) and never show the headers' values; a subscription whose host
// is detached or being deleted is let go with a Warning that it may remain on the BMC, instead of
// holding its deletion for ever, and so is one with no recorded id whose BMC refuses to list its
// subscriptions (the look for a lost create). The spec cannot change (the webhook refuses it, as
// metal3's does): delete and create again.
package bmceventsubscription
