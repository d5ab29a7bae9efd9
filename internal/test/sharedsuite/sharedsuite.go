// Package sharedsuite runs an environment the tests of a package share (an API server, Ironic,
// bmcsim, the operator as a subprocess): started by the first test that asks for it, so that
// `go test -short`, or a -run that matches nothing, starts nothing; stopped when the tests end or
// when the run is interrupted, so that no process outlives a Ctrl-C or a CI runner stopping it.
package sharedsuite

import (
	"flag"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Suite is the shared environment of one test package.
type Suite[S any] struct {
	// Name starts the messages of skipped tests ("end-to-end").
	Name string
	// Unavailable says why the environment cannot run on this machine ("" when it can).
	Unavailable func() string
	// Start starts the environment; on an error it stops what it started.
	Start func() (S, error)
	// Stop stops a started environment.
	Stop func(S)

	once      sync.Once
	mu        sync.Mutex
	env       S
	started   bool
	startedAt time.Time
	err       error
	skip      string
}

// Get returns the running environment, starting it on the first call; it skips t with -short or
// when the environment cannot run here, and fails t when it did not start.
func (s *Suite[S]) Get(t *testing.T) S {
	t.Helper()
	if testing.Short() {
		t.Skip(s.Name + ": skipped with -short")
	}
	s.once.Do(func() {
		if why := s.Unavailable(); why != "" {
			s.skip = s.Name + ": " + why
			return
		}
		at := time.Now()
		env, err := s.Start()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.env, s.err, s.startedAt = env, err, at
		s.started = err == nil
	})
	if s.skip != "" {
		t.Skip(s.skip)
	}
	if s.err != nil {
		t.Fatalf("starting the %s environment: %v", s.Name, s.err)
	}
	return s.env
}

// Main runs the tests with -test.parallel at parallel unless the command line set it (the tests
// wait on Ironic, not on the CPU), stops the environment when they end or on SIGINT/SIGTERM, and
// returns m.Run's code, the environment when it ran, and how long it ran from its start.
func (s *Suite[S]) Main(m *testing.M, parallel string) (code int, env S, ran bool, took time.Duration) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", parallel)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		s.stop()
		os.Exit(2)
	}()
	code = m.Run()
	env, ran, took = s.stop()
	return code, env, ran, took
}

// stop stops the environment once, if it started.
func (s *Suite[S]) stop() (env S, ran bool, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return env, false, 0
	}
	s.started = false
	s.Stop(s.env)
	return s.env, true, time.Since(s.startedAt)
}
