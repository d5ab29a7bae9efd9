package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/scheme"
)

// snapshot is what the tests follow of a host's status over time.
type snapshot struct {
	at          time.Time
	state       metal3.ProvisioningState
	opStatus    metal3.OperationalStatus
	poweredOn   bool
	errorType   metal3.ErrorType
	errorMsg    string
	errorCount  int
	nodeID      string
	annotations int
}

func (s snapshot) String() string {
	out := fmt.Sprintf("%s %s/%s power=%t error=%q×%d node=%s", s.at.Format("15:04:05.000"), s.state, s.opStatus,
		s.poweredOn, s.errorType, s.errorCount, s.nodeID)
	if s.errorMsg != "" {
		out += fmt.Sprintf(" message=%q", s.errorMsg)
	}
	return out
}

// recorder keeps every distinct status of every host, from a watch: polling would miss the short
// ones (a reboot's powered-off moment, an error that is retried two seconds later).
type recorder struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	hosts  map[string][]snapshot // namespace/name
}

func startRecorder(ctx context.Context, cfg *rest.Config) (*recorder, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &metal3.BareMetalHost{})
	if err != nil {
		return nil, err
	}
	r := &recorder{hosts: map[string][]snapshot{}}
	add := func(obj any) {
		h, ok := obj.(*metal3.BareMetalHost)
		if !ok {
			return
		}
		st := h.Status
		s := snapshot{at: time.Now(), state: st.Provisioning.State, opStatus: st.OperationalStatus, poweredOn: st.PoweredOn,
			errorType: st.ErrorType, errorMsg: st.ErrorMessage, errorCount: st.ErrorCount, nodeID: st.Provisioning.ID, annotations: len(h.Annotations)}
		key := h.Namespace + "/" + h.Name
		r.mu.Lock()
		defer r.mu.Unlock()
		list := r.hosts[key]
		if n := len(list); n > 0 {
			last := list[n-1]
			last.at = s.at
			if last == s {
				return
			}
		}
		r.hosts[key] = append(list, s)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) },
	}); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { _ = c.Start(runCtx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the recorder's watch did not sync")
	}
	return r, nil
}

func (r *recorder) stop() { r.cancel() }

// history returns the host's snapshots since a time.
func (r *recorder) history(ns, name string, since time.Time) []snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []snapshot
	for _, s := range r.hosts[ns+"/"+name] {
		if !s.at.Before(since) {
			out = append(out, s)
		}
	}
	return out
}

func formatHistory(h []snapshot) string {
	var b strings.Builder
	for _, s := range h {
		b.WriteString("\n    ")
		b.WriteString(s.String())
	}
	return b.String()
}
