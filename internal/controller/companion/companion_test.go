package companion

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestHostChangeMatters: a companion reads the provisioner again only after the host changes that
// can change what the provisioner reports; the others wait for the periodic re-read.
func TestHostChangeMatters(t *testing.T) {
	host := func(state metal3.ProvisioningState, op metal3.OperationalStatus, mods ...func(*metal3.BareMetalHost)) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns"}}
		h.Status.Provisioning.ID, h.Status.Provisioning.State, h.Status.OperationalStatus = "node-1", state, op
		for _, m := range mods {
			m(h)
		}
		return h
	}
	ok := metal3.OperationalStatusOK
	paused := func(h *metal3.BareMetalHost) { h.Annotations = map[string]string{metal3.PausedAnnotation: ""} }
	newNode := func(h *metal3.BareMetalHost) { h.Status.Provisioning.ID = "node-2" }
	for name, c := range map[string]struct {
		o, n *metal3.BareMetalHost
		want bool
	}{
		"registered (registering → inspecting)":       {host(metal3.StateRegistering, ok), host(metal3.StateInspecting, ok), true},
		"inspecting → preparing":                      {host(metal3.StateInspecting, ok), host(metal3.StatePreparing, ok), false},
		"preparing done (preparing → available)":      {host(metal3.StatePreparing, ok), host(metal3.StateAvailable, ok), true},
		"available → provisioning":                    {host(metal3.StateAvailable, ok), host(metal3.StateProvisioning, ok), false},
		"provisioning → provisioned":                  {host(metal3.StateProvisioning, ok), host(metal3.StateProvisioned, ok), false},
		"provisioned → deprovisioning":                {host(metal3.StateProvisioned, ok), host(metal3.StateDeprovisioning, ok), false},
		"deprovisioning → available":                  {host(metal3.StateDeprovisioning, ok), host(metal3.StateAvailable, ok), false},
		"servicing starts":                            {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, metal3.OperationalStatusServicing), false},
		"servicing done":                              {host(metal3.StateProvisioned, metal3.OperationalStatusServicing), host(metal3.StateProvisioned, ok), true},
		"servicing failed":                            {host(metal3.StateProvisioned, metal3.OperationalStatusServicing), host(metal3.StateProvisioned, metal3.OperationalStatusError), true},
		"paused":                                      {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, ok, paused), true},
		"unpaused":                                    {host(metal3.StateProvisioned, ok, paused), host(metal3.StateProvisioned, ok), true},
		"detached":                                    {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, metal3.OperationalStatusDetached), true},
		"registered again on a new node (adopted)":    {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, ok, newNode), true},
		"nothing that matters (a power poll's write)": {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, ok), false},
	} {
		if got := hostChangeMatters(c.o, c.n); got != c.want {
			t.Errorf("%s: wakes the companions = %v, want %v", name, got, c.want)
		}
	}
}
