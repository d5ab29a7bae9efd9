package ironic

import "regexp"

// bmcServerError matches what sushy (Ironic's Redfish library) says when the BMC answered a
// request with a server error ("HTTP POST <url> returned code 500. …") or did not answer
// ("Unable to connect to <url>. Error: …"); Ironic's step failures quote it in last_error.
var bmcServerError = regexp.MustCompile(`(?i)returned code 5[0-9][0-9]\b|unable to connect to `)

// bmcFault reports whether a failure message says the BMC failed (a 5xx answer, or none) rather
// than refused the request: the same request may well succeed later, so the host retries it
// without counting the failure against its limit (Result.Transient). A BMC that refuses a value
// answers 4xx, a failed firmware update ends its task in an exception, and a setting the boot did
// not apply fails Ironic's check: none of those match.
func bmcFault(msg string) bool { return bmcServerError.MatchString(msg) }
