// Package agent is bmcsim's simulated ironic-python-agent. When a simulated server boots the
// deploy image (or network-boots), the Runner starts an agent for it that looks itself up in
// Ironic, heartbeats, serves the agent API (inspection, cleaning, deploy and service steps, power
// off) and reports the server's simulated hardware. See docs/ironic-notes.md.
package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Runner runs the agents of one bmcsim process, all behind one HTTP listener.
type Runner struct {
	cfg Config
	srv *commandServer
	hc  *http.Client
	// insecure skips verifying Ironic's certificate, for agents booted with ipa-insecure=1 (as
	// ironic-python-agent does; Ironic's self-signed certificate is common).
	insecure *http.Client

	mu     sync.Mutex
	agents map[string]*agentInstance // by machine ID
	nodes  map[string]string         // machine ID → node UUID from the last lookup (lookup hint)
	closed bool
	wg     sync.WaitGroup
}

// NewRunner starts the agent API listener.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	srv, err := newCommandServer(cfg.Listen, cfg.AutoTLS)
	if err != nil {
		return nil, fmt.Errorf("agent API listener on %s: %w", cfg.Listen, err)
	}
	r := &Runner{
		cfg: cfg,
		srv: srv,
		hc:  &http.Client{Timeout: cfg.HTTPTimeout},
		insecure: &http.Client{Timeout: cfg.HTTPTimeout, Transport: &http.Transport{
			Proxy:           http.ProxyFromEnvironment,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // ipa-insecure=1 asks for it
		}},
		agents: map[string]*agentInstance{},
		nodes:  map[string]string{},
	}
	return r, nil
}

// Boot is called when server m powers on into a deploy ISO (iso nil: network boot, using
// Config.APIURL). It returns ErrNotAgentImage (wrapped) when the ISO is not the agent image, and
// an error when no Ironic URL is known; otherwise an agent starts for m, replacing any previous one.
func (r *Runner) Boot(m Machine, iso []byte) error {
	var bi BootInfo
	if iso != nil {
		var err error
		if bi, err = ParseBootISO(iso); err != nil {
			return err
		}
	} else {
		bi = BootInfo{Params: map[string]string{}}
	}
	if bi.RootfsURL != "" {
		if err := r.fetchRootfs(bi.RootfsURL); err != nil {
			return err
		}
	}
	api := bi.APIURL
	if api == "" {
		api = r.cfg.APIURL
	}
	if api == "" {
		return errors.New("agent: the boot image has no ipa-api-url and no fallback Ironic URL is configured")
	}
	id := m.ID()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("agent: runner closed")
	}
	old := r.agents[id]
	a := newAgent(r, m, bi, api, r.nodes[id])
	r.agents[id] = a
	r.wg.Add(1)
	r.mu.Unlock()
	if old != nil {
		old.stop()
	}
	go func() {
		defer r.wg.Done()
		a.run()
	}()
	return nil
}

// Stop ends the agent of server id (powered off, or rebooted away from the deploy image). It does
// not wait for the agent's goroutine, so it is safe to call from Machine.PowerOff.
func (r *Runner) Stop(id string) {
	r.mu.Lock()
	a := r.agents[id]
	delete(r.agents, id)
	r.mu.Unlock()
	if a != nil {
		a.stop()
	}
}

// Running reports whether an agent runs for server id (it may have crashed by fault injection).
func (r *Runner) Running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[id] != nil
}

// CallbackBase is the agent API's base URL (the callback_url of each agent has a path below it).
func (r *Runner) CallbackBase() string { return r.srv.base }

// Close stops every agent and the listener, and waits for the agents to end.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	agents := r.agents
	r.agents = map[string]*agentInstance{}
	r.mu.Unlock()
	for _, a := range agents {
		a.stop()
	}
	err := r.srv.close()
	r.wg.Wait()
	return err
}

// fetchRootfs downloads a live image's root filesystem as its initramfs does before anything
// else runs: without it the server boots into nothing.
func (r *Runner) fetchRootfs(url string) error {
	resp, err := r.hc.Get(url)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		} else {
			_, err = io.Copy(io.Discard, resp.Body)
		}
	}
	if err != nil {
		return fmt.Errorf("agent: the live system cannot fetch its root filesystem from %s: %w", url, err)
	}
	return nil
}

func (r *Runner) rememberNode(machineID, nodeUUID string) {
	r.mu.Lock()
	r.nodes[machineID] = nodeUUID
	r.mu.Unlock()
}
