package ironic

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestWatcher runs the node watcher against real Ironic: polls of a host whose node Ironic works
// on are answered by the watcher's lists instead of one GET each, and the watcher tells when the
// node changed state, before the host's next poll would have found out.
func TestWatcher(t *testing.T) {
	e := integration(t)
	t.Parallel()
	cfg := e.ironic.config()
	cfg.LongDelay = 30 * time.Second // the host's own polls come late: the notice must come first
	p := newTestProvisioner(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); _ = p.Watch(ctx) }()
	t.Cleanup(func() { cancel(); <-watchDone })

	srv := e.host(t)
	host := testHost(t, srv)
	host.InspectionMode = metal3.InspectionModeFast // out of band: quick, no agent
	host.AutomatedCleaningMode = metal3.CleaningModeDisabled
	register(t, p, &host)

	res, _, err := p.Inspect(ctx, host, provisioner.InspectOptions{})
	if err != nil || !res.Busy {
		t.Fatalf("starting inspection: %s, %v", describe(res), err)
	}
	want := types.NamespacedName{Namespace: host.Namespace, Name: host.Name}
	polls, notices := 0, 0
	c := callsDelta(p, func() {
		// Poll as the controller would on a short requeue, and count the notices for our host
		// until the inspection is done.
		deadline := time.After(3 * time.Minute)
		for {
			select {
			case nn := <-p.Changes():
				if nn == want {
					notices++
				}
			case <-time.After(cfg.ShortDelay):
			case <-deadline:
				t.Fatal("inspection did not finish in 3 minutes")
			}
			polls++
			res, hw, err := p.Inspect(ctx, host, provisioner.InspectOptions{})
			if err != nil {
				t.Fatalf("poll %d: %v", polls, err)
			}
			if !res.Busy {
				if res.Failed() || hw == nil {
					t.Fatalf("inspection: %s, hardware %v", describe(res), hw)
				}
				return
			}
		}
	})
	t.Logf("%d polls, %d notices, Ironic calls %v", polls, notices, c)
	if notices == 0 {
		t.Error("the watcher sent no notice while the node went inspecting → manageable")
	}
	if c["watch"] == 0 {
		t.Error("the watcher did not list while a host polled")
	}
	// Without the watcher every poll is a GET; with it only the inventory read at the end and a
	// GET when a list is late.
	if polls >= 4 && c["inspect"] > int64(polls)/2 {
		t.Errorf("%d polls made %d inspect requests; the watcher's lists should answer most polls", polls, c["inspect"])
	}
	mustDone(t, "delete", time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}
