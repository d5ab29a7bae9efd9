package dataimage

import (
	"testing"

	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestHostChangesPassesLiveUpdateEnd: a DataImage deleted while its host services waits (the CD
// may hold the agent), and the live update ends with the host provisioned and powered on as
// before: only the end of servicing can wake it.
func TestHostChangesPassesLiveUpdateEnd(t *testing.T) {
	host := func(op metal3.OperationalStatus, errType metal3.ErrorType) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{}
		h.Status.Provisioning.State = metal3.StateProvisioned
		h.Status.Provisioning.ID = "node"
		h.Status.PoweredOn = true
		h.Status.OperationalStatus = op
		h.Status.ErrorType = errType
		return h
	}
	for name, tc := range map[string]struct {
		old, new *metal3.BareMetalHost
		want     bool
	}{
		"servicing ends":                  {host(metal3.OperationalStatusServicing, ""), host(metal3.OperationalStatusOK, ""), true},
		"a failed live update is aborted": {host(metal3.OperationalStatusError, metal3.ServicingError), host(metal3.OperationalStatusOK, ""), true},
		"servicing starts":                {host(metal3.OperationalStatusOK, ""), host(metal3.OperationalStatusServicing, ""), true},
		"nothing that matters":            {host(metal3.OperationalStatusOK, ""), host(metal3.OperationalStatusOK, ""), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := hostChanges().Update(ctrlevent.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("passed %t, want %t", got, tc.want)
			}
		})
	}
}
