package sharedsuite

import (
	"sync/atomic"
	"testing"
)

func TestStartsOnceAndStopsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("with -short, Get skips every user")
	}
	var starts, stops atomic.Int32
	s := &Suite[*int]{
		Name:        "test",
		Unavailable: func() string { return "" },
		Start: func() (*int, error) {
			starts.Add(1)
			v := 42
			return &v, nil
		},
		Stop: func(*int) { stops.Add(1) },
	}
	if _, ran, _ := s.stop(); ran {
		t.Fatal("stop before any start: ran, want nothing stopped")
	}
	var got [4]*int
	t.Run("users", func(t *testing.T) {
		for i := range got {
			t.Run("", func(t *testing.T) {
				t.Parallel()
				got[i] = s.Get(t)
			})
		}
	})
	if starts.Load() != 1 {
		t.Fatalf("%d starts for 4 users, want 1", starts.Load())
	}
	for i, env := range got {
		if env != got[0] || *env != 42 {
			t.Fatalf("user %d got %v, want the one environment", i, env)
		}
	}
	if env, ran, _ := s.stop(); !ran || env != got[0] {
		t.Fatalf("stop: ran %v, environment %v; want the started one stopped", ran, env)
	}
	if _, ran, _ := s.stop(); ran || stops.Load() != 1 {
		t.Fatalf("second stop: ran %v, %d stops; want one stop in all (Ctrl-C and the end of the tests both stop)", ran, stops.Load())
	}
}

func TestUnavailableSkipsWithoutStarting(t *testing.T) {
	started := false
	s := &Suite[int]{
		Name:        "end-to-end",
		Unavailable: func() string { return "Ironic is not installed" },
		Start:       func() (int, error) { started = true; return 0, nil },
		Stop:        func(int) {},
	}
	if testing.Short() {
		t.Skip("with -short, Get skips before asking")
	}
	var skipped bool
	t.Run("user", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		s.Get(t)
	})
	if msg := s.skip; !skipped || started || msg != "end-to-end: Ironic is not installed" {
		t.Fatalf("skipped %v, started %v, reason %q; want a skip naming the reason and no start", skipped, started, s.skip)
	}
}
