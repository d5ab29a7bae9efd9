package main

import (
	"fmt"
	"log/slog"

	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// startRunner starts the simulated agents' API. bmcsim itself waits the configured boot time
// before it boots an agent, so the agent's own boot delay stays at its (short) default.
func startRunner(cfg config.Config, ironicURL, listen string, log *slog.Logger) (server.Runner, func() error, error) {
	r, err := agent.NewRunner(agent.Config{
		APIURL:         ironicURL,
		WriteSpeedMBps: float64(cfg.WriteSpeedMBps),
		Listen:         listen,
		Logger:         log.With("component", "agent"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the agents: %w", err)
	}
	return r, r.Close, nil
}
