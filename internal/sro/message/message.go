// Package message is the one way text reaches the special-resource-operator's status fields and
// events: volatile parts (resource versions, UIDs, request IDs) removed, so that identical
// failures give identical messages and the status is not rewritten on every retry; one line;
// bounded; credentials in URLs removed (statustext). Callers never pass other credentials (pull
// Secret contents never enter errors).
package message

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/metalforge/metalforge/internal/statustext"
)

// Max bounds a message: an Event note's limit, as a status message becomes a note.
const Max = statustext.EventNoteLimit

var volatile = regexp.MustCompile(`(?i)(resourceVersion|uid|request[- ]?id)[:=]\s*"?[0-9a-z-]+"?`)

// Sanitize makes text fit for a status message or event note: volatile identifiers dropped (the
// message stays the same from one attempt to the next), then statustext's cleaning (credentials in
// URLs, one line, at most Max bytes with the ellipsis).
func Sanitize(msg string) string {
	return statustext.Clean(volatile.ReplaceAllString(msg, "$1"), Max)
}

// List shortens a list for a message: "a, b, c and 2 more".
func List(items []string) string {
	const shown = 3
	if len(items) <= shown {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:shown], ", "), len(items)-shown)
}
