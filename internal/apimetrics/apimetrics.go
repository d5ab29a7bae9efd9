// Package apimetrics counts the requests a binary sends to the Kubernetes API server, by resource
// and verb, so that write budgets (API writes per host) can be measured from the binary's own
// /metrics instead of guessed from the API server's.
package apimetrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Requests is metalforge_api_requests_total{resource,subresource,verb,code}.
var Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metalforge_api_requests_total",
	Help: "Requests this process sent to the Kubernetes API server, by resource, subresource, verb and HTTP status class.",
}, []string{"resource", "subresource", "verb", "code"})

func init() { metrics.Registry.MustRegister(Requests) }

// Wrap returns a RoundTripper that counts every request; use it with rest.Config.Wrap.
func Wrap(rt http.RoundTripper) http.RoundTripper { return counter{next: rt} }

type counter struct{ next http.RoundTripper }

func (c counter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	code := "error"
	if resp != nil {
		code = string("12345"[min(max(resp.StatusCode/100, 1), 5)-1]) + "xx"
	}
	resource, sub := Resource(req.URL.Path)
	Requests.WithLabelValues(resource, sub, Verb(req.Method, req.URL.Query().Get("watch") == "true", isCollection(req.URL.Path)), code).Inc()
	return resp, err
}

// Resource extracts the resource and subresource from an API path:
// /api/v1/namespaces/ns/secrets/x → secrets; /apis/metal3.io/v1alpha1/namespaces/ns/baremetalhosts/x/status →
// baremetalhosts, status.
func Resource(path string) (resource, subresource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other", ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "namespaces", ""
	}
	if len(parts) >= 3 {
		subresource = parts[2]
	}
	return parts[0], subresource
}

func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 2 && parts[0] == "api" {
		parts = parts[2:]
	} else if len(parts) >= 3 && parts[0] == "apis" {
		parts = parts[3:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return len(parts) <= 1
}

// Verb maps an HTTP method to a Kubernetes verb.
func Verb(method string, watch, collection bool) string {
	switch method {
	case http.MethodGet:
		switch {
		case watch:
			return "watch"
		case collection:
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// IsWrite reports whether a verb changes state.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}
