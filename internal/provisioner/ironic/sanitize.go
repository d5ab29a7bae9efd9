package ironic

import (
	"regexp"
	"strings"

	"github.com/metalforge/metalforge/internal/statustext"
)

// The one place that makes Ironic's text safe and stable for status, events and returned errors.
// Ironic's last_error embeds request IDs (different on every attempt, so the status would change
// on every retry), Redfish error bodies ("Extended information: [...]", long and volatile) and, in
// some drivers' messages, values from driver_info. sanitize removes the first two; secrets passes
// the values that must never appear (the BMC password), which are replaced by "******";
// statustext then removes credentials in URLs (Ironic quotes the image_source it failed on).

var (
	requestIDPattern = regexp.MustCompile(`\s*\(?\[?\s*req-[0-9a-fA-F-]{36}\s*\]?\)?`)
	httpCodePattern  = regexp.MustCompile(`returned code (40[13])\b`)
)

// sanitize cleans a message from Ironic: each non-empty secret replaced, request IDs and provider
// bodies removed, then statustext's cleaning (credentials in URLs such as the image_source Ironic
// quotes, whitespace, length).
func sanitize(msg string, secrets ...string) string {
	msg = sanitizeSecrets(msg, secrets...)
	msg = requestIDPattern.ReplaceAllString(msg, "")
	msg = dropExtendedInfo(msg)
	msg = compactSteps(msg)
	return statustext.Clean(msg, errorMessageLimit)
}

// extendedInfoMarker starts sushy's rendering of a Redfish error body: a bracketed list of message
// objects. dropExtendedInfo removes it up to the matching bracket (a regular expression cannot
// match the nesting).
const extendedInfoMarker = "Extended information:"

func dropExtendedInfo(msg string) string {
	for {
		i := strings.Index(msg, extendedInfoMarker)
		if i < 0 {
			return msg
		}
		j := i + len(extendedInfoMarker)
		for j < len(msg) && msg[j] == ' ' {
			j++
		}
		end := len(msg)
		if j < len(msg) && (msg[j] == '[' || msg[j] == '{') {
			if e := closing(msg, j); e >= 0 {
				end = e
			}
		}
		msg = strings.TrimRight(msg[:i], " ") + msg[end:]
	}
}

// closing is the index just past the bracket that closes the one at msg[open] (quoted text
// skipped, with its backslash escapes), or -1 when none does.
func closing(msg string, open int) int {
	depth := 0
	var quote byte
	for k := open; k < len(msg); k++ {
		c := msg[k]
		switch {
		case quote != 0 && c == '\\':
			k++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return k + 1
			}
		}
	}
	return -1
}

// failedStepMarker starts the step in Ironic's "Node <uuid> failed step <step>: <why>" (cleaning,
// deployment, servicing), where the step is its Python dict, arguments included: every BIOS
// setting and firmware URL asked comes before the reason, and a few of them pushed the reason past
// the status's length limit. compactSteps names the step as interface.step instead
// ("failed step bios.apply_configuration: …"); the arguments are what the user asked.
const failedStepMarker = "failed step {"

var stepKey = regexp.MustCompile(`'(interface|step)': '([A-Za-z0-9_]+)'`)

func compactSteps(msg string) string {
	from := 0
	for {
		i := strings.Index(msg[from:], failedStepMarker)
		if i < 0 {
			return msg
		}
		open := from + i + len(failedStepMarker) - 1
		end := closing(msg, open)
		if end < 0 {
			return msg // not a whole dict: left as it is
		}
		keys := map[string]string{}
		for _, m := range stepKey.FindAllStringSubmatch(msg[open:end], -1) {
			if _, seen := keys[m[1]]; !seen {
				keys[m[1]] = m[2]
			}
		}
		name := keys["step"]
		if keys["interface"] != "" && name != "" {
			name = keys["interface"] + "." + name
		}
		if name == "" {
			from = end
			continue
		}
		msg = msg[:open] + name + msg[end:]
		from = open + len(name)
	}
}

// sanitizeSecrets replaces each secret (of at least 3 characters: shorter ones would mangle
// ordinary words) by "******".
func sanitizeSecrets(msg string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, "******")
		}
	}
	return msg
}

// bmcProblem turns a registration failure into a message naming the BMC problem. Credentials are
// the common case and Ironic's text for them is a wall of Redfish JSON, so it gets a plain
// sentence; other failures keep Ironic's (sanitized) words.
func bmcProblem(lastError string, secrets ...string) string {
	if m := httpCodePattern.FindStringSubmatch(lastError); m != nil {
		return "BMC rejected the credentials (HTTP " + m[1] + "): check the username and password in the BMC credentials Secret"
	}
	lower := strings.ToLower(lastError)
	if strings.Contains(lower, "authentication") || strings.Contains(lower, "unauthorized") {
		return "BMC rejected the credentials: check the username and password in the BMC credentials Secret"
	}
	if lastError == "" {
		return "BMC access could not be verified"
	}
	return "BMC access could not be verified: " + sanitize(lastError, secrets...)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
