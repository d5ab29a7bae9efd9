package host

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// provisionerChanges is a source that queues the hosts a watching provisioner reports as changed
// in the engine. A host already waiting for its next poll is reconciled now instead (the queue
// keeps one entry per host), so it moves on as soon as the engine finished a step rather than up
// to a poll interval later.
func provisionerChanges(w provisioner.Watcher) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case nn := <-w.Changes():
					q.Add(reconcile.Request{NamespacedName: nn})
				}
			}
		}()
		return nil
	})
}
