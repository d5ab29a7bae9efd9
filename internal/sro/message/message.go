// Package message is the one way text reaches the special-resource-operator's status fields and
// events: volatile parts (resource versions, UIDs, request IDs) removed, so that identical
// failures give identical messages and the status is not rewritten on every retry; one line;
// bounded. Callers never pass credentials (pull Secret contents never enter errors).
package message

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Max bounds a message.
const Max = 1024

var volatile = regexp.MustCompile(`(?i)(resourceVersion|uid|request[- ]?id)[:=]\s*"?[0-9a-z-]+"?`)

// Sanitize makes text fit for a status message or event note.
func Sanitize(msg string) string {
	msg = volatile.ReplaceAllString(msg, "$1")
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > Max {
		cut := Max
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// List shortens a list for a message: "a, b, c and 2 more".
func List(items []string) string {
	const shown = 3
	if len(items) <= shown {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:shown], ", "), len(items)-shown)
}
