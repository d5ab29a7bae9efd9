// Command bmcsim simulates a data center of Redfish-managed servers on loopback: many BMCs behind
// one listener, the in-band agent each server runs when it boots the deploy image, fault injection
// through a control endpoint and optional persistent state. See docs/bmcsim.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bmcsim:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		hosts       = flag.Int("hosts", 0, "number of simulated servers (overrides the config file; default 1)")
		listen      = flag.String("listen", "127.0.0.1:8000", "Redfish listen address shared by all servers")
		inventory   = flag.String("inventory", "", "write the server inventory (JSON) to this file once serving")
		useTLS      = flag.Bool("tls", false, "serve HTTPS with a generated self-signed certificate")
		tlsCert     = flag.String("tls-cert", "", "with --tls, write the generated certificate (PEM) to this file")
		configFile  = flag.String("config", "", "configuration file (YAML or JSON); flags override it")
		stateFile   = flag.String("state", "", "load server state from this file and save it on every change")
		controlAddr = flag.String("control", "", "serve the control endpoint (faults, server state) on this address")
		namePrefix  = flag.String("name-prefix", "", "server name prefix (overrides the config file)")
		bootTime    = flag.Duration("boot-time", 0, "delay from power-on to the agent starting (overrides the config file)")
		writeSpeed  = flag.Int("write-speed", 0, "simulated image write speed in MB/s (overrides the config file)")
		latency     = flag.Duration("redfish-latency", 0, "latency added to every Redfish answer (overrides the config file)")
		ironicURL   = flag.String("ironic-url", "", "Ironic API URL for agents whose boot image carries no ipa-api-url (network boot)")
		agentListen = flag.String("agent-listen", "127.0.0.1:0", "listen address of the simulated agents' API")
		noAgent     = flag.Bool("no-agent", false, "run without agents: servers boot into nothing")
		quiet       = flag.Bool("quiet", false, "do not print the BMC addresses")
		logLevel    = flag.String("log-level", "info", "log level: debug, info, warn, error")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", flag.Args())
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := config.Default()
	if *configFile != "" {
		var err error
		if cfg, err = config.Load(*configFile); err != nil {
			return err
		}
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["hosts"] {
		cfg.Hosts = *hosts
	}
	if set["name-prefix"] {
		cfg.NamePrefix = *namePrefix
	}
	if set["boot-time"] {
		cfg.BootTime = config.Duration{Duration: *bootTime}
	}
	if set["write-speed"] {
		cfg.WriteSpeedMBps = *writeSpeed
	}
	if set["redfish-latency"] {
		cfg.RedfishLatency = config.Duration{Duration: *latency}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	opts := bmcsim.Options{
		Config: cfg, Listen: *listen, TLS: *useTLS, StateFile: *stateFile, ControlListen: *controlAddr, Logger: log,
	}
	var closeRunner func() error
	if !*noAgent {
		runner, closeFn, err := startRunner(cfg, *ironicURL, *agentListen, log)
		if err != nil {
			return err
		}
		opts.Runner, closeRunner = runner, closeFn
	}

	sim, err := bmcsim.Start(opts)
	if err != nil {
		if closeRunner != nil {
			_ = closeRunner()
		}
		return err
	}
	if *useTLS && *tlsCert != "" {
		if err := os.WriteFile(*tlsCert, sim.CertPEM(), 0o644); err != nil {
			return fmt.Errorf("writing --tls-cert: %w", err)
		}
	}
	if !*quiet {
		if err := sim.PrintAddresses(os.Stdout); err != nil {
			return err
		}
	}
	// The inventory is written last: its appearance tells scripts that bmcsim is serving.
	if *inventory != "" {
		if err := sim.WriteInventory(*inventory); err != nil {
			return err
		}
	}
	log.Info("Serving", "servers", cfg.Hosts, "redfish", sim.BaseURL(), "control", sim.ControlURL(), "state", *stateFile)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	log.Info("Shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = sim.Close(shutdownCtx)
	if closeRunner != nil {
		err = errors.Join(err, closeRunner())
	}
	return err
}
