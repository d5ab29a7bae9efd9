package redfish

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

func jsonBytes(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return b.Bytes(), err
}

// baseRegistry is the DMTF Base message registry version the error MessageIds name.
const baseRegistry = "Base.1.18."

// error writes a Redfish error body: code and one @Message.ExtendedInfo entry from the Base registry.
func (q *request) error(status int, id, message string, args ...string) {
	if args == nil {
		args = []string{}
	}
	code := baseRegistry + id
	severity := "Critical"
	if status < 500 {
		severity = "Warning"
	}
	body := M{"error": M{
		"code":    code,
		"message": message,
		"@Message.ExtendedInfo": []M{{
			"@odata.type":     "#Message.v1_2_0.Message",
			"MessageId":       code,
			"Message":         message,
			"MessageArgs":     args,
			"MessageSeverity": severity,
			"Severity":        severity,
			"Resolution":      resolution(status),
		}},
	}}
	data, err := jsonBytes(body)
	if err != nil {
		http.Error(q.w, message, status)
		return
	}
	h := q.headers()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	q.w.WriteHeader(status)
	_, _ = q.w.Write(data)
}

func resolution(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "Establish a session or supply valid credentials, then resubmit the request."
	case http.StatusNotFound:
		return "Provide a valid resource identifier and resubmit the request."
	case http.StatusPreconditionFailed:
		return "Read the resource again to get its current ETag, then resubmit the request."
	case http.StatusInternalServerError:
		return "Resubmit the request. If the problem persists, reset the service."
	}
	return "Correct the request and resubmit it."
}

func (q *request) notFound() {
	q.error(http.StatusNotFound, "ResourceNotFound", "The requested resource of type Resource named '"+q.r.URL.Path+"' was not found.", "Resource", q.r.URL.Path)
}
