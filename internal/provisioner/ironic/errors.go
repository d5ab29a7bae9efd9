package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// apiError is a request Ironic refused. Its message carries Ironic's faultstring, sanitized; it
// never carries the request body we sent.
type apiError struct {
	doing  string
	status int
	fault  string
	// sentinel is provisioner.ErrUnavailable for 5xx, nil otherwise.
	sentinel error
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s: Ironic answered %d", e.doing, e.status)
	if e.fault != "" {
		msg += ": " + e.fault
	}
	if e.sentinel != nil {
		msg += " (" + e.sentinel.Error() + ")"
	}
	return msg
}

func (e *apiError) Unwrap() error { return e.sentinel }

// statusOf returns the HTTP status of an Ironic error, 0 when there was no answer.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		return ue.Actual
	}
	return 0
}

func isStatus(err error, code int) bool { return statusOf(err) == code }

// faultOf is Ironic's (sanitized) reason in an error answer.
func faultOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.fault
	}
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		return faultString(ue.Body)
	}
	return sanitize(err.Error())
}

// classifyError turns a gophercloud error into ours: an *apiError for answers (5xx wrap
// ErrUnavailable), ErrUnavailable for no answer at all, the context's error when the caller gave up.
func classifyError(err error, doing string) error {
	if err == nil {
		return nil
	}
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		ae := &apiError{doing: doing, status: ue.Actual, fault: faultString(ue.Body)}
		if ue.Actual >= 500 {
			ae.sentinel = provisioner.ErrUnavailable
		}
		return ae
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	var ne net.Error
	var ue2 *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue2) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %s", doing, provisioner.ErrUnavailable, sanitize(err.Error()))
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// faultString extracts Ironic's message from an error body, sanitized (see rawFaultString).
func faultString(body []byte) string { return sanitize(rawFaultString(body)) }

// rawFaultString extracts Ironic's message from an error body as Ironic wrote it:
// {"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"...\", \"debuginfo\": null}"}.
// Only for a caller that must cut something out before sanitize bounds the text (the payload a
// failed create_subscription quotes, eventsubscription.go); everyone else takes faultString.
func rawFaultString(body []byte) string {
	var outer struct {
		ErrorMessage json.RawMessage `json:"error_message"`
	}
	if json.Unmarshal(body, &outer) != nil || len(outer.ErrorMessage) == 0 {
		return string(body)
	}
	var inner struct {
		FaultString string `json:"faultstring"`
	}
	// error_message is a JSON string holding JSON in most answers, an object in a few.
	var s string
	if json.Unmarshal(outer.ErrorMessage, &s) == nil {
		if json.Unmarshal([]byte(s), &inner) == nil && inner.FaultString != "" {
			return inner.FaultString
		}
		return s
	}
	if json.Unmarshal(outer.ErrorMessage, &inner) == nil {
		return inner.FaultString
	}
	return string(outer.ErrorMessage)
}

// busy reports whether Ironic refused because the node is locked or in the middle of something
// (409 Conflict): the caller retries after a short delay instead of reporting an error.
func busy(err error) bool { return isStatus(err, http.StatusConflict) }

// unanswered reports an error of a request whose outcome is unknown: no answer (a timeout, a
// broken connection, the caller gave up) or a 5xx, after which Ironic's conductor may still have
// carried the request out. A 4xx is a refusal.
func unanswered(err error) bool {
	st := statusOf(err)
	return err != nil && (st == 0 || st >= http.StatusInternalServerError)
}

// notFound reports a 404.
func notFound(err error) bool { return isStatus(err, http.StatusNotFound) }

// errorMessageLimit keeps status messages readable.
const errorMessageLimit = 600

// scrub removes secrets from an error's message; errors.Is and errors.As still see what it wraps.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := sanitizeSecrets(msg, secrets...)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }
