package ironic

import "regexp"

// sushy (Ironic's Redfish library) says "HTTP <method> <url> returned code <code>. …" when the BMC
// answered a request with an error, and "Unable to connect to <url>. Error: …" when it did not
// answer; Ironic's step failures quote these in last_error.
var (
	// 501 (Not Implemented) and 505 are a refusal: in Redfish, 501 says the BMC does not do
	// what was asked, and retrying it would reboot the server for nothing.
	bmcServerError = regexp.MustCompile(`HTTP [A-Z]+ \S+ returned code 5(0[0234689]|[1-9][0-9])\. `)
	bmcNoAnswer    = regexp.MustCompile(`Unable to connect to \S+\. Error: `)
	// sushy says "Unable to connect" of configuration problems too: a TLS handshake or
	// certificate refused, a proxy that refused, an answer it could not follow. Retrying them
	// changes nothing.
	bmcMisconfigured = regexp.MustCompile(`(?i)SSLError|SSL:|certificate|ProxyError|no Location header`)
)

// bmcFault reports whether a failure message (whole: the status's copy may be cut before sushy's
// words) says the BMC failed (a 5xx answer, or none) rather
// than refused the request: the same request may well succeed later, so the host retries it past
// its limit (Result.Transient). A BMC that refuses a value answers 4xx, a firmware update whose
// Redfish task fails ends in an exception ("Firmware update failed …"), and a setting the boot did
// not apply fails Ironic's check ("… are not updated"): none of those match.
func bmcFault(msg string) bool {
	if bmcServerError.MatchString(msg) {
		return true
	}
	return bmcNoAnswer.MatchString(msg) && !bmcMisconfigured.MatchString(msg)
}
