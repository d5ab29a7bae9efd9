// Package naming makes the names and label values the special-resource-operator derives from
// user input (SpecialResource names, kernel versions) fit Kubernetes' limits without colliding:
// a value that fits is used as it is; one that does not is shortened and given a hash of the
// whole, so that two long inputs never share a name.
package naming

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// MaxLabelValue is the longest label value (and DNS label) Kubernetes accepts.
const MaxLabelValue = 63

var (
	labelValueOK     = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	notLabelChar     = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
	notDNSChar       = regexp.MustCompile(`[^a-z0-9-]+`)
	notSubdomainChar = regexp.MustCompile(`[^a-z0-9.-]+|\.\.+`)
)

// Hash is a short, stable hash of s (8 hex digits, FNV-1a).
func Hash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// LabelValue returns s when it is a valid label value; otherwise s with invalid characters
// replaced, cut to fit, and suffixed with a hash of s.
func LabelValue(s string) string {
	if len(s) <= MaxLabelValue && labelValueOK.MatchString(s) {
		return s
	}
	clean := strings.Trim(notLabelChar.ReplaceAllString(s, "_"), "_.-")
	return shorten(clean, "_", s, MaxLabelValue)
}

// DNSLabel joins parts with "-" into a DNS label (lower case, letters, digits and "-", at most
// 63 characters): as they are when that is already valid, otherwise cleaned, cut and suffixed
// with a hash of the input.
func DNSLabel(parts ...string) string { return dnsName(notDNSChar, parts) }

// DNSName is DNSLabel that also keeps dots (a DNS subdomain of at most 63 characters): for
// object names, which read better with a kernel's dots (simple-kmod-5.14.0-284.el9.x86-64).
func DNSName(parts ...string) string { return dnsName(notSubdomainChar, parts) }

func dnsName(invalid *regexp.Regexp, parts []string) string {
	joined := strings.Join(parts, "-")
	clean := strings.Trim(invalid.ReplaceAllString(strings.ToLower(joined), "-"), "-.")
	clean = strings.ReplaceAll(strings.ReplaceAll(clean, ".-", "-"), "-.", "-")
	if clean == joined && len(clean) <= MaxLabelValue && !strings.Contains(clean, "..") {
		return clean
	}
	return shorten(clean, "-", joined, MaxLabelValue)
}

// shorten cuts clean so that clean+sep+hash(whole) fits in limit.
func shorten(clean, sep, whole string, limit int) string {
	h := Hash(whole)
	keep := limit - len(sep) - len(h)
	if len(clean) > keep {
		clean = clean[:keep]
	}
	clean = strings.TrimRight(clean, "_.-")
	if clean == "" {
		return h
	}
	return clean + sep + h
}

// OwnerValue is the value of sro.OwnedLabel for a SpecialResource name.
func OwnerValue(srName string) string { return LabelValue(srName) }

// StateLabel is the node label that says state (its first four characters, "0000") of
// SpecialResource srName is ready on the node: sro.StateLabelPrefix + "<srName>-<NNNN>", with a
// long name shortened so that the part after the "/" stays within 63 characters.
func StateLabel(srName, state string) string {
	if len(state) > 4 {
		state = state[:4]
	}
	prefix, _ := strings.CutPrefix(sro.StateLabelPrefix, "specialresource.openshift.io/")
	room := MaxLabelValue - len(prefix) - len("-") - len(state)
	if len(srName) > room {
		srName = shorten(srName, "-", srName, room)
	}
	return sro.StateLabelPrefix + srName + "-" + state
}

// StateLabelPrefix is the prefix every StateLabel of srName starts with.
func StateLabelPrefix(srName string) string {
	l := StateLabel(srName, "0000")
	return l[:len(l)-len("0000")]
}

// IsStateLabelOf reports whether key is a StateLabel of SpecialResource srName (and not of
// another one whose name starts the same way: "a" and "a-b").
func IsStateLabelOf(key, srName string) bool {
	return HasStatePrefix(key, StateLabelPrefix(srName))
}

// HasStatePrefix is IsStateLabelOf with the SpecialResource's StateLabelPrefix computed once by
// the caller (checking every label of every node costs no allocation).
func HasStatePrefix(key, prefix string) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) != 4 {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
