// Package statustext is the one place that makes text fit for what anyone who can read an object
// sees: status messages, condition messages, Event notes and log lines that quote user input.
// Every controller's own cleaner (Ironic's request IDs, SRO's volatile fields) ends here.
//
// Two things are done to any such text. Credentials are removed: the user information of every
// URL ("https://user:token@mirror/…") and the values of query parameters that carry them
// (pre-signed URLs' signatures, access tokens), because image, firmware and Ignition URLs are
// user input and appear in the errors of every system that fetches them (Ironic quotes its
// image_source, Go's net/http quotes the request URL). And the text is made one line and bounded
// on a character boundary, the ellipsis included, so that an Event note never exceeds the API
// server's 1024-byte limit (a longer note is refused and the Event lost).
package statustext

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EventNoteLimit is the API server's limit on an events.k8s.io/v1 Event's note, in bytes.
const EventNoteLimit = 1024

// ConditionMessageLimit bounds a condition message: long enough for a list of every invalid
// setting of a BIOS, far below the API's 32768-byte limit on metav1.Condition messages.
const ConditionMessageLimit = 4096

// redactedMark is what the BMC address parser puts in place of an address's user information.
const redactedMark = "<redacted>@"

// ellipsis marks a cut.
const ellipsis = "…"

var (
	// userInfo is a URL's "user:password@" part: after a scheme, up to the last "@" before any
	// "/", "?", "#" or space (a password may hold "@": Go's url.Parse and Python's urllib both
	// take the host after the last one).
	userInfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s]+@`)
	// userPassword is a "user:password@" part whose password holds "/", "?" or "#" unencoded (a
	// base64 token, say), which userInfo stops at: after a scheme, a user without those and a
	// colon, then anything but quotes up to an "@". A match that is a host name and port followed
	// by a path ("oci://mirror.example:8443/ocp/rhcos@sha256:…", a mirror registry's digest
	// reference) is kept (redactUserPassword).
	userPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)([^/?#\s@:"'<>]+):([^\s@"'<>]*)@`)
	// portAndPath is what follows a host's colon: a port, then the path or nothing.
	portAndPath = regexp.MustCompile(`^[0-9]+(/|$)`)
	// credentialParam is a query parameter whose name says it carries a credential.
	credentialParam = regexp.MustCompile(`(?i)([?&;][a-z0-9_.-]*(?:sig|signature|token|pass|pwd|secret|credential|key|auth)[a-z0-9_.-]*=)[^&#\s"'<>]*`)
)

// Redact removes the credentials URLs in s may carry: their user information becomes "***@" and
// the values of credential query parameters "***". The rest of s is kept as it is.
func Redact(s string) string {
	if strings.Contains(s, "@") {
		s = userInfo.ReplaceAllString(s, "${1}***@")
		s = userPassword.ReplaceAllStringFunc(s, redactUserPassword)
	}
	if strings.ContainsAny(s, "?&;") {
		s = credentialParam.ReplaceAllString(s, "${1}***")
	}
	return s
}

// redactUserPassword redacts one userPassword match unless it is a host followed by a path
// holding an "@": an IPv6 host, or a name with a dot (or localhost) before a port and a path. A
// user name has no dot, so "user:123/abc@" stays a password.
func redactUserPassword(m string) string {
	parts := userPassword.FindStringSubmatch(m)
	user, rest := parts[2], parts[3]
	if strings.HasPrefix(user, "[") {
		return m // an IPv6 host: user information cannot start with "["
	}
	if (strings.Contains(user, ".") || user == "localhost") && portAndPath.MatchString(rest) {
		return m
	}
	return parts[1] + "***@"
}

// Clean redacts s, collapses its whitespace into single spaces (a tool's multi-line output becomes
// one line), replaces invalid UTF-8 and cuts it to at most limit bytes, ellipsis included, on a
// character boundary. A limit of 0 or less leaves the length alone. The replacement comes before
// the cut because JSON encoding would make each invalid byte a 3-byte U+FFFD after it: the API
// server would refuse the Event note over its limit, and a condition message would never equal
// its stored copy (a status write at every reconcile).
func Clean(s string, limit int) string {
	s = strings.Join(strings.Fields(Redact(strings.ToValidUTF8(s, "\uFFFD"))), " ")
	return Cap(s, limit)
}

// Cap cuts s to at most limit bytes, an ellipsis included, on a character boundary; s is returned
// unchanged when it fits or limit is 0 or less.
func Cap(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	cut := limit - len(ellipsis)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// FieldErrors is errs with their values and details redacted: an admission webhook's answer
// reaches the client, the API server's audit log and GitOps tools' status, and the values it
// refuses include URLs with credentials in them (url.Parse's errors quote them too). A value
// with an "@" that neither Redact nor the BMC address parser (redactedMark) took for user information ("https:/user:pw@host" with one
// slash, "user:pw@host/path" with no scheme, a password with a space) may still hold one: it is
// left out of the answer, whose field and detail still say what is wrong.
func FieldErrors(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		if v, ok := c.BadValue.(string); ok {
			c.BadValue = Redact(v)
			if r := c.BadValue.(string); strings.Contains(strings.NewReplacer("***@", "", redactedMark, "").Replace(r), "@") {
				c.BadValue = field.OmitValueType{}
			}
		}
		c.Detail = Redact(c.Detail)
		out[i] = &c
	}
	return out
}
