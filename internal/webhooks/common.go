package webhooks

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// newErrors returns the errors of now that were not already in before. An update is rejected
// only for what it breaks: an object stored before a rule existed (or before this webhook was
// installed) must stay updatable, or controllers could not even remove its finalizer.
func newErrors(now, before field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range now {
		if !slices.ContainsFunc(before, func(b *field.Error) bool { return sameError(e, b) }) {
			out = append(out, e)
		}
	}
	return out
}

func sameError(a, b *field.Error) bool {
	return a.Type == b.Type && a.Field == b.Field && a.Detail == b.Detail &&
		fmt.Sprintf("%#v", a.BadValue) == fmt.Sprintf("%#v", b.BadValue)
}

// parseURL parses an absolute URL with a host and one of the allowed schemes. The error is a
// sentence for a field error's detail.
func parseURL(raw string, schemes ...string) (*url.URL, error) {
	allowed := "an absolute " + quoteSchemes(schemes) + " URL"
	u, err := url.ParseRequestURI(raw)
	if err != nil && strings.Contains(raw, "@") {
		// Unparsable with user information: net/url's error quotes pieces of it (a password
		// holding "/" becomes an `invalid port ":<its start>"`), which no cleaner can tell from
		// the rest. Credentials in a URL must be percent-encoded.
		return nil, fmt.Errorf("must be %s (user information with a character such as / # ? or a space must be percent-encoded)", allowed)
	}
	if err != nil {
		return nil, fmt.Errorf("must be %s: %w", allowed, err)
	}
	if !slices.Contains(schemes, strings.ToLower(u.Scheme)) {
		return nil, fmt.Errorf("must be %s, not a %q URL", allowed, u.Scheme)
	}
	if u.Host == "" && strings.ToLower(u.Scheme) != "file" {
		return nil, fmt.Errorf("must be %s with a host", allowed)
	}
	return u, nil
}

func quoteSchemes(schemes []string) string {
	quoted := make([]string, len(schemes))
	for i, s := range schemes {
		quoted[i] = s + "://"
	}
	switch len(quoted) {
	case 1:
		return quoted[0]
	default:
		return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	}
}

// quoteAll renders allowed values for a message: "a", "b" or "c".
func quoteAll[S ~string](values ...S) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = fmt.Sprintf("%q", string(v))
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}
