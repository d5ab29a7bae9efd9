package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The microversions the agent asks for, as ironic-python-agent does: 1.68 covers agent_token,
// agent_version and agent_verify_ca in heartbeats; continue_inspection exists from 1.84.
const (
	agentAPIVersion      = "1.68"
	inspectionAPIVersion = "1.84"
)

// ironicClient is the agent side of the Ironic ramdisk API (lookup, heartbeat, continue_inspection).
type ironicClient struct {
	base string // Ironic API root without /v1
	http *http.Client
}

// apiError is a non-2xx answer from Ironic.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// lookupResponse is Ironic's answer to lookup and (new endpoint) continue_inspection.
type lookupResponse struct {
	Node struct {
		UUID               string         `json:"uuid"`
		Properties         map[string]any `json:"properties"`
		InstanceInfo       map[string]any `json:"instance_info"`
		DriverInternalInfo map[string]any `json:"driver_internal_info"`
	} `json:"node"`
	Config struct {
		HeartbeatTimeout   int    `json:"heartbeat_timeout"`
		AgentToken         string `json:"agent_token"`
		AgentTokenRequired bool   `json:"agent_token_required"`
	} `json:"config"`
	// UUID is the old continue_inspection answer ({"uuid": …}).
	UUID string `json:"uuid"`
}

func newIronicClient(apiURL string, hc *http.Client) *ironicClient {
	base := strings.TrimRight(apiURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	return &ironicClient{base: base, http: hc}
}

func (c *ironicClient) do(ctx context.Context, method, path, version string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	target := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		target = c.base + path
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode >= 300 {
		return &apiError{Status: resp.StatusCode, Message: ironicFault(data)}
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding %s %s: %w", method, path, err)
		}
	}
	return nil
}

// ironicFault extracts faultstring from Ironic's error body, which nests a JSON document in a
// string: {"error_message": "{\"faultcode\": …, \"faultstring\": …}"}.
func ironicFault(data []byte) string {
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(data, &outer) == nil && outer.ErrorMessage != "" {
		var inner struct {
			Faultstring string `json:"faultstring"`
		}
		if json.Unmarshal([]byte(outer.ErrorMessage), &inner) == nil && inner.Faultstring != "" {
			return inner.Faultstring
		}
		return outer.ErrorMessage
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

func (c *ironicClient) lookup(ctx context.Context, macs []string, nodeUUID string) (*lookupResponse, error) {
	q := url.Values{"addresses": {strings.Join(macs, ",")}}
	if nodeUUID != "" {
		q.Set("node_uuid", nodeUUID)
	}
	var out lookupResponse
	if err := c.do(ctx, http.MethodGet, "/v1/lookup?"+q.Encode(), agentAPIVersion, nil, &out); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	if out.Node.UUID == "" {
		return nil, errors.New("lookup: answer without node uuid")
	}
	return &out, nil
}

type heartbeatRequest struct {
	CallbackURL  string `json:"callback_url"`
	AgentToken   string `json:"agent_token"`
	AgentVersion string `json:"agent_version"`
	// AgentVerifyCA is the agent's own TLS certificate (AutoTLS), which Ironic uses to verify it.
	AgentVerifyCA string `json:"agent_verify_ca,omitempty"`
}

func (c *ironicClient) heartbeat(ctx context.Context, nodeUUID string, hb heartbeatRequest) error {
	if err := c.do(ctx, http.MethodPost, "/v1/heartbeat/"+url.PathEscape(nodeUUID), agentAPIVersion, hb, nil); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

func (c *ironicClient) continueInspection(ctx context.Context, callbackURL string, data any) (*lookupResponse, error) {
	// The callback URL from the kernel parameters wins, as in IPA.
	path := "/v1/continue_inspection"
	if callbackURL != "" {
		path = callbackURL
	}
	var out lookupResponse
	if err := c.do(ctx, http.MethodPost, path, inspectionAPIVersion, data, &out); err != nil {
		return nil, fmt.Errorf("continue_inspection: %w", err)
	}
	return &out, nil
}
