package bmc

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ipmiPrivilegeLevels are the ipmi_priv_level values Ironic's ipmitool driver accepts.
var ipmiPrivilegeLevels = []string{"ADMINISTRATOR", "OPERATOR", "USER", "CALLBACK"}

// Parse interprets a BMC address the way metal3 does and returns what it means for Ironic. See the
// package documentation for the accepted forms and the few places where Parse is stricter than
// metal3. Every error is an *AddressError wrapping one of the Err* sentinels, and never contains
// credentials.
func Parse(address string) (*Access, error) {
	if address == "" {
		return nil, addressError("", ErrMissingHost,
			"the address is empty; expected host[:port] for IPMI or <scheme>://host[:port][/path]")
	}
	// Credentials are checked before anything else, so that no later message can echo them. Only
	// what follows the last "@" (the host part in any userinfo reading) is kept for the message.
	if i := strings.LastIndexByte(address, '@'); i >= 0 {
		return nil, addressError(redactedUserinfo+address[i+1:], ErrCredentialsInAddress,
			"user information (a user name or password before the host) is not allowed in a BMC address; "+
				"put the credentials in the Secret named by credentialsName")
	}
	if !utf8.ValidString(address) {
		return nil, addressError(strings.ToValidUTF8(address, "\uFFFD"), ErrMalformed, "the address is not valid UTF-8")
	}
	if i := strings.IndexFunc(address, isSpaceOrControl); i >= 0 {
		return nil, addressError(address, ErrMalformed,
			"whitespace or a control character at byte %d; a BMC address contains neither", i)
	}

	scheme, rest, err := splitScheme(address)
	if err != nil {
		return nil, err
	}
	typ, _, k, ok := lookupScheme(scheme)
	if !ok {
		return nil, unknownScheme(address, scheme)
	}

	authority, rest := cutAny(rest, "/?#")
	host, port, err := parseAuthority(address, authority)
	if err != nil {
		return nil, err
	}
	rest, _, _ = strings.Cut(rest, "#") // a fragment means nothing to a BMC; metal3 ignores it too
	rawPath, rawQuery, hasQuery := strings.Cut(rest, "?")
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		return nil, addressError(address, ErrMalformed, "the path has invalid percent-encoding; escape %% as %%25")
	}
	if strings.IndexFunc(path, unicode.IsControl) >= 0 || !utf8.ValidString(path) {
		return nil, addressError(address, ErrMalformed, "the path decodes to control characters or invalid UTF-8")
	}

	a := &Access{
		Type:                            typ,
		Scheme:                          scheme,
		Host:                            host,
		Port:                            port,
		Path:                            path,
		Driver:                          k.driver,
		Interfaces:                      k.interfaces,
		NeedsMAC:                        k.needsMAC,
		SupportsSecureBoot:              k.secureBoot,
		SupportsISOPreprovisioningImage: k.isoPPI,
		RequiresProvisioningNetwork:     k.provNet,
		SupportsRAID:                    k.interfaces.RAID != ifaceNoRAID,
	}
	if k.redfishFamily() {
		// The query means nothing to Redfish; metal3 ignores it, and so do we.
		if err := checkSystemPath(address, path); err != nil {
			return nil, err
		}
		return a, nil
	}
	a.PrivilegeLevel = ipmiDefaultPrivilegeLevel
	if hasQuery {
		level, err := privilegeLevel(address, rawQuery)
		if err != nil {
			return nil, err
		}
		if level != "" {
			a.PrivilegeLevel = level
		}
	}
	return a, nil
}

// splitScheme finds the scheme, lower-cased as url.Parse does, and the text after it. Three forms:
// "scheme://rest"; metal3's "scheme:rest" for a known scheme (url.Parse reads it as opaque and metal3
// re-parses it with "://"); and a bare host[:port][/path], which is IPMI.
func splitScheme(address string) (scheme, rest string, err error) {
	head, _ := cutAny(address, "/?#")
	// "://" counts only when nothing before it ends the authority: its own "/" must be the first.
	if i := strings.Index(address, "://"); i >= 0 && i+1 == len(head) {
		scheme = strings.ToLower(address[:i])
		if scheme == "" {
			return "", "", addressError(address, ErrUnknownScheme,
				`nothing before "://"; supported schemes: %s`, supportedSchemes)
		}
		return scheme, address[i+3:], nil
	}
	j := strings.IndexByte(head, ':')
	if j <= 0 {
		return TypeIPMI, address, nil
	}
	prefix := strings.ToLower(head[:j])
	if _, _, _, ok := lookupScheme(prefix); ok {
		return prefix, address[j+1:], nil
	}
	if strings.Count(head, ":") > 1 {
		// An unbracketed IPv6 literal; parseAuthority says how to write it.
		return TypeIPMI, address, nil
	}
	// "word:digits" is host:port; "word:something-else" can only be meant as a scheme.
	if j+1 < len(head) && !isDigit(head[j+1]) && isSchemeToken(prefix) {
		return "", "", unknownScheme(address, prefix)
	}
	return TypeIPMI, address, nil
}

func unknownScheme(address, scheme string) error {
	if base, transport, found := strings.Cut(scheme, "+"); found {
		if k, ok := kinds[base]; ok {
			if !k.transports {
				return addressError(address, ErrUnknownScheme,
					"unknown scheme %q: %s takes no +%s suffix; only Redfish-family schemes take +http or +https",
					scheme, base, transport)
			}
			return addressError(address, ErrUnknownScheme,
				"unknown scheme %q: the suffix after + must be http or https", scheme)
		}
	}
	return addressError(address, ErrUnknownScheme, "unknown scheme %q; supported: %s", scheme, supportedSchemes)
}

// parseAuthority splits host[:port] or [ipv6][:port] and checks both parts.
func parseAuthority(address, authority string) (host, port string, err error) {
	if authority == "" {
		return "", "", addressError(address, ErrMissingHost,
			"no host; expected an IP address or DNS name after the scheme, e.g. redfish://10.0.0.5/redfish/v1/Systems/1")
	}
	var rawPort string
	var hasPort bool
	if authority[0] == '[' {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", addressError(address, ErrInvalidHost, `"[" without a closing "]"; write IPv6 addresses as [fe80::1]`)
		}
		host = authority[1:end]
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return "", "", addressError(address, ErrInvalidHost,
				"%q in brackets is not an IPv6 address; brackets are only for IPv6 literals (zone IDs are not supported)", host)
		}
		after := authority[end+1:]
		if after != "" {
			if after[0] != ':' {
				return "", "", addressError(address, ErrInvalidHost, `unexpected %q after "]"; expected ":port" or nothing`, after)
			}
			rawPort, hasPort = after[1:], true
		}
	} else {
		host, rawPort, hasPort = strings.Cut(authority, ":")
		if hasPort && strings.Contains(rawPort, ":") {
			if net.ParseIP(authority) != nil {
				return "", "", addressError(address, ErrInvalidHost,
					"IPv6 address %q must be enclosed in brackets, e.g. redfish://[%s]:8000/redfish/v1/Systems/1", authority, authority)
			}
			return "", "", addressError(address, ErrInvalidPort,
				"port %q is not a number; allowed: 1-65535 (IPv6 addresses go in brackets)", rawPort)
		}
		if host == "" {
			return "", "", addressError(address, ErrMissingHost, "no host before the port; expected an IP address or DNS name")
		}
		if reason := checkHostName(host); reason != "" {
			return "", "", addressError(address, ErrInvalidHost, "host %q %s", host, reason)
		}
	}
	if hasPort {
		if port, err = checkPort(address, rawPort); err != nil {
			return "", "", err
		}
	}
	return host, port, nil
}

// checkHostName accepts an IPv4 address or a DNS name (the same pattern metal3 applies), and returns
// why not otherwise. Digits and dots alone must form an IPv4 address: "10.0.0.256" is a typo, not a
// host name.
func checkHostName(host string) string {
	if ip := net.ParseIP(host); ip != nil && !strings.Contains(host, ":") {
		return ""
	}
	if strings.Trim(host, "0123456789.") == "" {
		return "is not a valid IPv4 address (four decimal numbers 0-255 without leading zeros)"
	}
	if len(host) > 253 {
		return "is not a valid DNS name: longer than 253 characters"
	}
	for label := range strings.SplitSeq(host, ".") {
		if !isDNSLabel(label) {
			return "is not a valid IP address or DNS name (labels of 1-63 letters, digits and inner hyphens, separated by dots)"
		}
	}
	return ""
}

func isDNSLabel(label string) bool {
	if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !isDigit(c) && !isLetter(c) && c != '-' {
			return false
		}
	}
	return true
}

func checkPort(address, raw string) (string, error) {
	if raw == "" {
		return "", addressError(address, ErrInvalidPort, `empty port after ":"; allowed: 1-65535, or omit the ":"`)
	}
	if strings.Trim(raw, "0123456789") != "" {
		return "", addressError(address, ErrInvalidPort, "port %q is not a number; allowed: 1-65535", raw)
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 65535 {
		return "", addressError(address, ErrInvalidPort, "port %s is out of range; allowed: 1-65535", raw)
	}
	return strconv.Itoa(n), nil
}

// checkSystemPath rejects the one system path that can never work: the Systems collection itself
// with the system ID left off. An empty path (or the service root /redfish/v1) is fine: Ironic then
// uses the BMC's only system.
func checkSystemPath(address, path string) error {
	if strings.EqualFold(strings.Trim(path, "/"), redfishServiceRoot+"/Systems") {
		return addressError(address, ErrMissingSystemPath,
			"the path %q names the Systems collection, not a system; append the system ID "+
				"(e.g. /redfish/v1/Systems/1), or leave the path empty when the BMC has a single system", path)
	}
	return nil
}

// privilegeLevel reads ?privilegelevel= as metal3 does (first value wins, other keys are ignored),
// but checks it against the values Ironic accepts instead of failing later at node validation. ""
// means the key is absent.
func privilegeLevel(address, rawQuery string) (string, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", addressError(address, ErrMalformed,
			`the query cannot be parsed; the only query IPMI addresses take is ?privilegelevel=<level>`)
	}
	values, ok := q["privilegelevel"]
	if !ok {
		return "", nil
	}
	level := strings.ToUpper(values[0])
	for _, allowed := range ipmiPrivilegeLevels {
		if level == allowed {
			return level, nil
		}
	}
	return "", addressError(address, ErrInvalidPrivilegeLevel,
		"privilegelevel must be one of %s", strings.Join(ipmiPrivilegeLevels, ", "))
}

// cutAny splits s before the first byte that is in chars.
func cutAny(s, chars string) (before, after string) {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

func isSpaceOrControl(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isSchemeToken reports whether s has URL scheme syntax: a letter, then letters, digits, "+", "-", ".".
func isSchemeToken(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
