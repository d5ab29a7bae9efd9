package provisioning

import (
	"bytes"
	"context"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// imagesWatcher wakes the singleton when the images file changes. The file is a mounted
// ConfigMap, which the kubelet rewrites in place when the release changes it; no API event comes
// with that.
type imagesWatcher struct {
	path     string
	interval time.Duration
	events   chan event.GenericEvent
}

// defaultImagesPoll is how often the images file is read for a change (a few hundred bytes).
const defaultImagesPoll = 10 * time.Second

func newImagesWatcher(path string, interval time.Duration) *imagesWatcher {
	if interval <= 0 {
		interval = defaultImagesPoll
	}
	return &imagesWatcher{path: path, interval: interval, events: make(chan event.GenericEvent, 1)}
}

// source is the controller's view of the watcher.
func (w *imagesWatcher) source() source.Source {
	return source.Channel(w.events, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{singleton}
	}))
}

// Start polls until ctx ends (a manager runnable).
func (w *imagesWatcher) Start(ctx context.Context) error {
	last, _ := os.ReadFile(w.path)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now, _ := os.ReadFile(w.path)
		if bytes.Equal(now, last) {
			continue
		}
		last = now
		select {
		case w.events <- event.GenericEvent{Object: &metal3.Provisioning{}}:
		default: // one pending wake-up is enough
		}
	}
}
