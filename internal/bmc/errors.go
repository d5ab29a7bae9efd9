package bmc

import (
	"errors"
	"fmt"
)

// Sentinel errors for the classes of bad address. Parse returns an *AddressError that wraps exactly
// one of them, so callers can branch with errors.Is.
var (
	// ErrUnknownScheme: the scheme is not one metal3 (and so Metalforge) supports.
	ErrUnknownScheme = errors.New("unknown BMC address scheme")
	// ErrMissingHost: the address is empty or has no host.
	ErrMissingHost = errors.New("missing BMC host")
	// ErrInvalidHost: the host is neither an IP address nor a DNS name.
	ErrInvalidHost = errors.New("invalid BMC host")
	// ErrInvalidPort: the port is empty, not a number, or outside 1-65535.
	ErrInvalidPort = errors.New("invalid BMC port")
	// ErrMissingSystemPath: a Redfish address names the Systems collection but no system in it.
	ErrMissingSystemPath = errors.New("missing Redfish system ID")
	// ErrCredentialsInAddress: the address carries user information (user:password@). Credentials
	// belong in the BMC credentials Secret, never in the spec.
	ErrCredentialsInAddress = errors.New("credentials in BMC address")
	// ErrInvalidPrivilegeLevel: an IPMI ?privilegelevel= value Ironic does not accept.
	ErrInvalidPrivilegeLevel = errors.New("invalid IPMI privilege level")
	// ErrMalformed: the address is not a URL or host[:port] at all (whitespace, control characters,
	// bad percent-encoding, an unparsable query).
	ErrMalformed = errors.New("malformed BMC address")
)

// redactedUserinfo replaces everything up to the last "@" of an address in an AddressError.
const redactedUserinfo = "<redacted>@"

// maxEchoedAddress bounds how much of an address an error message repeats back.
const maxEchoedAddress = 256

// AddressError says what is wrong with a BMC address and what is allowed instead.
//
// Address is safe to log: when the original address carried user information, everything up to and
// including the last "@" is replaced by "<redacted>", and nothing else in the error comes from before
// that "@".
type AddressError struct {
	// Address is the offending address, with any user information removed.
	Address string
	// Reason is a sentence naming the problem and what is allowed.
	Reason string
	// Err is the sentinel for the class of problem (ErrUnknownScheme, ErrMissingHost, ...).
	Err error
}

func (e *AddressError) Error() string {
	addr := e.Address
	if len(addr) > maxEchoedAddress {
		addr = addr[:maxEchoedAddress] + "..."
	}
	return fmt.Sprintf("invalid BMC address %q: %s", addr, e.Reason)
}

// Unwrap returns the sentinel, so errors.Is(err, ErrInvalidPort) works.
func (e *AddressError) Unwrap() error { return e.Err }

func addressError(address string, sentinel error, format string, args ...any) *AddressError {
	return &AddressError{Address: address, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}
