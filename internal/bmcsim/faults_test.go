package bmcsim_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim"
)

const sessionsPath = "/redfish/v1/SessionService/Sessions"

// TestHungWriteEndsWithItsClient covers the timeout fault on calls with a body (Reset, a Boot
// PATCH, InsertMedia): Go notices a client that hung up only once the body was read, so an unread
// body would keep the call, and the simulator's shutdown, waiting for the whole hang.
func TestHungWriteEndsWithItsClient(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	e.control(http.MethodPut, "/v1/faults", map[string]any{"timeoutRate": 1})
	req, err := http.NewRequest(http.MethodPost, e.sim.BaseURL()+e.sys()+"/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType": "On"}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(e.host.Username, e.host.Password)
	client := &http.Client{Timeout: 300 * time.Millisecond}
	_, err = client.Do(req)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("POST under timeoutRate 1: %v, want a client timeout", err)
	}
	e.control(http.MethodDelete, "/v1/faults", nil)

	sim := e.sim
	e.sim = nil // closed here, not again by the cleanup
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sim.Close(ctx); err != nil {
		t.Fatalf("closing bmcsim after the client gave up on a hung POST: %v", err)
	}
}

// TestPerServerFaultsReachTheLogin covers calls that carry no valid credentials: a BMC that is
// down fails the login too (sushy opens a session first), and whatever password it is sent.
func TestPerServerFaultsReachTheLogin(t *testing.T) {
	e := newEnv(t, envOptions{})
	other := e.sim.Hosts()[1]
	e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"errorRate": 1})

	login := func(h bmcsim.Host) int {
		return e.call(bmcsim.Host{}, http.MethodPost, sessionsPath, map[string]string{"UserName": h.Username, "Password": h.Password}, nil).status
	}
	equal(t, "login to the failing BMC", login(e.host), http.StatusInternalServerError)
	wrong := e.host
	wrong.Password = "wrong"
	equal(t, "login to the failing BMC with a wrong password", login(wrong), http.StatusInternalServerError)
	equal(t, "basic auth to the failing BMC with a wrong password", e.call(wrong, http.MethodGet, e.sys(), nil, nil).status, http.StatusInternalServerError)
	equal(t, "login to another BMC", login(other), http.StatusCreated)
	equal(t, "service root (no credentials, no server)", e.call(bmcsim.Host{}, http.MethodGet, "/redfish/v1", nil, nil).status, http.StatusOK)

	e.control(http.MethodDelete, "/v1/servers/"+e.host.Name+"/faults", nil)
	equal(t, "login once cleared", login(e.host), http.StatusCreated)
}
