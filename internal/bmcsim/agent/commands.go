package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Command states as ironic-python-agent reports them.
const (
	statusRunning   = "RUNNING"
	statusSucceeded = "SUCCEEDED"
	statusFailed    = "FAILED"
)

// command is one agent command; its JSON form is what Ironic reads from POST and GET /v1/commands/.
type command struct {
	ID     string         `json:"id"`
	Name   string         `json:"command_name"` // without the extension namespace, as IPA reports it
	Params map[string]any `json:"command_params"`
	Status string         `json:"command_status"`
	Error  any            `json:"command_error"`
	Result any            `json:"command_result"`

	done chan struct{}
}

// commandError is the serialised exception IPA puts in command_error; Ironic shows details.
type commandError struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

// stepError carries the IPA exception type of a failed command.
type stepError struct {
	typ string
	msg string
}

func (e *stepError) Error() string { return e.msg }

func failf(typ, format string, args ...any) error {
	return &stepError{typ: typ, msg: fmt.Sprintf(format, args...)}
}

// handler runs one command; async handlers run in their own goroutine.
type handler struct {
	async bool
	run   func(ctx context.Context, a *agentInstance, params map[string]any) (any, error)
}

// errCrashed ends a command without a result: the agent died while running it.
var errCrashed = errors.New("agent crashed")

func (a *agentInstance) commandList() []command {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]command, len(a.commands))
	for i, c := range a.commands {
		out[i] = *c
	}
	return out
}

// execute starts a command. It returns the command (finished for sync commands or wait=true), or an
// HTTP status and error: 409 while the previous command still runs (IPA's AgentIsBusy), 400 for an
// unknown command.
func (a *agentInstance) execute(ctx context.Context, name string, params map[string]any, wait bool) (command, int, error) {
	h, ok := handlers[name]
	if !ok {
		return command{}, http.StatusBadRequest, fmt.Errorf("Unknown command: %s", name) //nolint:staticcheck // ironic-python-agent's own wording
	}
	_, short, found := strings.Cut(name, ".")
	if !found {
		short = name
	}
	if params == nil {
		params = map[string]any{}
	}
	a.mu.Lock()
	if n := len(a.commands); n > 0 && a.commands[n-1].Status == statusRunning {
		busy := a.commands[n-1].Name
		a.mu.Unlock()
		return command{}, http.StatusConflict, fmt.Errorf("Agent is busy: the agent is already executing a command (%s)", busy) //nolint:staticcheck // ironic-python-agent's own wording
	}
	c := &command{ID: randomUUID(), Name: short, Params: params, Status: statusRunning, done: make(chan struct{})}
	a.commands = append(a.commands, c)
	a.mu.Unlock()
	a.event("command %s started", name)

	runIt := func() {
		res, err := h.run(a.ctx, a, params)
		if errors.Is(err, errCrashed) {
			return // stays RUNNING forever, as seen from outside (nobody answers anyway)
		}
		a.mu.Lock()
		if err != nil {
			typ := "CommandExecutionError"
			var se *stepError
			if errors.As(err, &se) {
				typ = se.typ
			}
			c.Status = statusFailed
			c.Error = commandError{Type: typ, Code: 500, Message: err.Error(), Details: err.Error()}
		} else {
			c.Status = statusSucceeded
			c.Result = res
		}
		close(c.done)
		a.mu.Unlock()
		a.event("command %s %s", name, strings.ToLower(c.Status))
	}
	if !h.async {
		runIt()
	} else {
		go func() {
			runIt()
			a.heartbeatNow()
			if name == "standby.power_off" && !a.isCrashed() {
				// The OS powers the machine off once the command has returned.
				a.m.PowerOff()
			}
		}()
		if wait {
			select {
			case <-c.done:
			case <-ctx.Done():
			case <-a.ctx.Done():
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return *c, 0, nil
}

func randomUUID() string {
	h := randomHex(16)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}
