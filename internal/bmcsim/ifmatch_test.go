package bmcsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"
)

// TestConcurrentPatchesWithOneETag sends, for each resource clients PATCH with If-Match, two
// PATCHes carrying the ETag both read, and lets their bodies go only once both handlers started
// reading them (the server's 100 Continue), so both are in flight together: one change applies,
// the other must get 412 rather than overwrite it unseen.
func TestConcurrentPatchesWithOneETag(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	cd := "/redfish/v1/Managers/" + e.host.ID + "/VirtualMedia/Cd"
	leds := []string{"Lit", "Blinking", "Off"}
	tests := map[string]struct {
		path string
		// body is round i's change; both PATCHes of a round send it, and it changes the resource.
		body func(i int) any
	}{
		"System": {e.sys(), func(i int) any { return map[string]any{"IndicatorLED": leds[i%3]} }},
		"SecureBoot": {e.sys() + "/SecureBoot", func(i int) any {
			return map[string]any{"SecureBootEnable": i%2 == 0}
		}},
		"Bios/Settings": {e.sys() + "/Bios/Settings", func(i int) any {
			return map[string]any{"Attributes": map[string]any{"PowerOnDelaySeconds": i + 1}}
		}},
		"VirtualMedia": {cd, func(i int) any {
			if i%2 == 1 {
				return map[string]any{"Image": nil, "Inserted": false}
			}
			return map[string]any{"Image": e.imageURL("/deploy.iso"), "Inserted": true}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for i := range 4 {
				etag := e.must(http.StatusOK, http.MethodGet, tc.path, nil).header.Get("ETag")
				statuses := patchTogether(t, e, tc.path, etag, tc.body(i))
				ok := 0
				for _, s := range statuses {
					if s == http.StatusNoContent || s == http.StatusOK {
						ok++
					} else if s != http.StatusPreconditionFailed {
						t.Fatalf("round %d: status %d, want 204 or 412", i, s)
					}
				}
				if ok != 1 {
					t.Fatalf("round %d: statuses %v, want one change and one 412", i, statuses)
				}
			}
		})
	}
}

// patchTogether sends two PATCHes with If-Match etag and returns their statuses.
func patchTogether(t *testing.T, e *env, path, etag string, body any) []int {
	t.Helper()
	data, err := json.Marshal(body)
	must(t, err)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Wait for 100 Continue before sending a body (a client timeout, the test waits on the gate).
	tr.ExpectContinueTimeout = time.Minute
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}

	var continued sync.WaitGroup
	continued.Add(2)
	both := make(chan struct{})
	go func() { continued.Wait(); close(both) }()
	statuses := make([]int, 2)
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i := range 2 {
		done.Go(func() {
			var once sync.Once
			trace := &httptrace.ClientTrace{Got100Continue: func() { once.Do(continued.Done) }}
			req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPatch,
				e.sim.BaseURL()+path, &gatedReader{gate: both, r: bytes.NewReader(data)})
			if err != nil {
				errs[i] = err
				once.Do(continued.Done)
				return
			}
			req.ContentLength = int64(len(data))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Expect", "100-continue")
			req.Header.Set("If-Match", etag)
			req.SetBasicAuth(e.host.Username, e.host.Password)
			resp, err := client.Do(req)
			once.Do(continued.Done) // answered without reading the body
			if err != nil {
				errs[i] = err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	done.Wait()
	for _, err := range errs {
		must(t, err)
	}
	return statuses
}

// gatedReader holds a request body back until gate closes.
type gatedReader struct {
	gate <-chan struct{}
	r    io.Reader
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.gate
	return g.r.Read(p)
}
