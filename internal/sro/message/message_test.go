package message

import (
	"strings"
	"testing"
)

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"a\n  b\tc":                                   "a b c",
		`conflict: resourceVersion: "1234"`:           "conflict: resourceVersion",
		"request-id=abc-123 failed":                   "request-id failed",
		"uid=5f1e9a7c-0b8e gone":                      "uid gone",
		"pull https://bot:tok@quay.example/v2/x: 401": "pull https://***@quay.example/v2/x: 401",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	long := Sanitize(strings.Repeat("é", 2000))
	if len(long) > Max || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, "éé") {
		t.Errorf("long message: %d bytes", len(long))
	}
}

func TestList(t *testing.T) {
	for n, want := range map[int]string{1: "a", 3: "a, b, c", 5: "a, b, c and 2 more"} {
		if got := List([]string{"a", "b", "c", "d", "e"}[:n]); got != want {
			t.Errorf("List(%d) = %q, want %q", n, got, want)
		}
	}
}
