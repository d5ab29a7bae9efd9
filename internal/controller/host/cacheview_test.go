package host

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// probe is a second controller of BareMetalHosts in the operator's manager: it records the hosts
// as its cached client shows them.
type probe struct {
	client client.Client
	mu     sync.Mutex
	seen   map[string]*metal3.BareMetalHost
}

func (p *probe) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	h := &metal3.BareMetalHost{}
	if err := p.client.Get(ctx, req.NamespacedName, h); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[req.Name] = h
	return reconcile.Result{}, nil
}

func (p *probe) last(name string) *metal3.BareMetalHost {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[name]
}

// TestSecondControllerSeesTheDeclaredView: another controller in the host controller's manager
// reads hosts whose status.hardware is reduced to what the host controller's view declares (CPU
// architecture and hostname), while the API reader and HardwareData have the whole inspection;
// only labelled Secrets are in the cache, HardwareData never is.
func TestSecondControllerSeesTheDeclaredView(t *testing.T) {
	ns := env.Namespace(t)
	p := &probe{seen: map[string]*metal3.BareMetalHost{}}
	var mgr ctrl.Manager
	startManager(t, env.Config, ns, fixture.New(fixture.Config{}), func(m ctrl.Manager) error {
		mgr, p.client = m, m.GetClient()
		skip := true // the name is per process: -count=2 registers it again
		return ctrl.NewControllerManagedBy(m).Named("probe").For(&metal3.BareMetalHost{}).
			WithOptions(controller.Options{SkipNameValidation: &skip}).Complete(p)
	})
	createHost(t, newHost(ns, "host-0").Build())
	full := waitHost(t, ns, "host-0", "inspected", func(h *metal3.BareMetalHost) bool { return h.Status.HardwareDetails != nil })
	if full.Status.HardwareDetails == nil || len(full.Status.HardwareDetails.NIC) == 0 {
		t.Fatalf("the stored host has no inspected NICs: %+v", full.Status.HardwareDetails)
	}
	poll.Until(t, "the probe to see the inspected host", func() (bool, string) {
		h := p.last("host-0")
		return h != nil && h.Status.HardwareDetails != nil, "not yet"
	})
	hw := p.last("host-0").Status.HardwareDetails
	want := compactHardware(full.Status.HardwareDetails)
	if hw.CPU.Arch != want.CPU.Arch || hw.Hostname != want.Hostname || hw.SystemVendor != want.SystemVendor ||
		len(hw.NIC) != 0 || len(hw.Storage) != 0 || hw.CPU.Model != "" || hw.SystemVendor.SerialNumber != "" {
		t.Errorf("the second controller's cached host hardware = %+v, want only arch %q, hostname %q, vendor and model %+v", hw, want.CPU.Arch, want.Hostname, want.SystemVendor)
	}
	if want.SystemVendor.Manufacturer == "" || want.SystemVendor.ProductName == "" {
		t.Errorf("inspection found no system vendor/model to keep: %+v", full.Status.HardwareDetails.SystemVendor)
	}
	ctx := context.Background()
	direct := &metal3.BareMetalHost{}
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: "host-0"}, direct); err != nil {
		t.Fatal(err)
	}
	if len(direct.Status.HardwareDetails.NIC) == 0 {
		t.Error("the API reader shows a reduced host")
	}
	if hd, err := getHardwareData(ns, "host-0"); err != nil || len(hd.Spec.HardwareDetails.NIC) == 0 {
		t.Errorf("HardwareData: %v, %v", hd, err)
	}

	// Secrets: the labelled BMC Secret is cached, an unlabelled one is not visible to cached reads.
	create(t, builder.DataSecret(ns, "unlabelled", "k", "v"))
	err := p.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unlabelled"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("cached read of an unlabelled Secret: %v, want not found", err)
	}
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: "unlabelled"}, &corev1.Secret{}); err != nil {
		t.Errorf("API reader of an unlabelled Secret: %v", err)
	}
}
