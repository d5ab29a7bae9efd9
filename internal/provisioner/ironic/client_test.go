package ironic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/metalforge/metalforge/internal/provisioner"
)

func TestChooseFeatures(t *testing.T) {
	tests := map[string]struct {
		min, max  [2]int
		want      Features
		wantError bool
	}{
		"Ironic 39 (1.115)": {min: [2]int{1, 1}, max: [2]int{1, 115},
			want: Features{Microversion: "1.110", MaxVersion: "1.115", DisablePowerOff: true, Health: true, DeployWaitAbort: true, Servicing: true, VirtualMedia: true}},
		"1.109": {min: [2]int{1, 1}, max: [2]int{1, 109},
			want: Features{Microversion: "1.109", MaxVersion: "1.109", DisablePowerOff: true, Health: true, Servicing: true, VirtualMedia: true}},
		"Ironic 29 (1.96)": {min: [2]int{1, 1}, max: [2]int{1, 96},
			want: Features{Microversion: "1.95", MaxVersion: "1.96", DisablePowerOff: true, Servicing: true, VirtualMedia: true}},
		"Ironic 26.1 (1.93): DataImage's GET": {min: [2]int{1, 1}, max: [2]int{1, 94},
			want: Features{Microversion: "1.93", MaxVersion: "1.94", Servicing: true, VirtualMedia: true}},
		"exactly the floor": {min: [2]int{1, 1}, max: [2]int{1, 89},
			want: Features{Microversion: "1.89", MaxVersion: "1.89", Servicing: true}},
		"1.88":             {min: [2]int{1, 1}, max: [2]int{1, 88}, wantError: true},
		"bookworm (1.82)":  {min: [2]int{1, 1}, max: [2]int{1, 82}, wantError: true},
		"a future v2 only": {min: [2]int{2, 0}, max: [2]int{2, 5}, wantError: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := chooseFeatures(tc.min[0], tc.min[1], tc.max[0], tc.max[1])
			if tc.wantError {
				if !errors.Is(err, ErrIronicTooOld) {
					t.Fatalf("error %v, want ErrIronicTooOld", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// fakeIronicRoot answers the version documents like an Ironic whose newest microversion is max.
func fakeIronicRoot(t *testing.T, max string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-OpenStack-Ironic-API-Maximum-Version", max)
		fmt.Fprintf(w, `{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": "1.1", "version": %q}}`, max)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestNegotiateRefusesOldIronic(t *testing.T) {
	srv := fakeIronicRoot(t, "1.88")
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Negotiate(context.Background())
	if !errors.Is(err, ErrIronicTooOld) || !errors.Is(err, provisioner.ErrUnavailable) {
		t.Fatalf("error %v, want ErrIronicTooOld wrapped in ErrUnavailable", err)
	}
	for _, want := range []string{"1.88", "1.89"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name version %s", err, want)
		}
	}
	// Every operation reports it (the host waits), with no node request made.
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: "x", BMCAddress: "redfish+http://127.0.0.1/redfish/v1/Systems/1"}
	if _, err := p.Provision(context.Background(), host, provisioner.ProvisionData{}, false); !errors.Is(err, ErrIronicTooOld) {
		t.Errorf("provision: %v, want ErrIronicTooOld", err)
	}
}

func TestNegotiateOnce(t *testing.T) {
	srv := fakeIronicRoot(t, "1.115")
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f, err := p.Negotiate(context.Background())
		if err != nil || f.Microversion != "1.110" {
			t.Fatalf("negotiate: %+v, %v", f, err)
		}
	}
	if got := p.Calls()["discover"]; got != 1 {
		t.Errorf("version discovery made %d requests, want 1 (cached)", got)
	}
}

func TestNegotiateUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	cfg := DefaultConfig()
	cfg.Endpoint = url + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Negotiate(context.Background()); !errors.Is(err, provisioner.ErrUnavailable) {
		t.Fatalf("error %v, want ErrUnavailable", err)
	}
}
