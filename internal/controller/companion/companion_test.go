package companion

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
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
	servicingError := func(h *metal3.BareMetalHost) { h.Status.ErrorType = metal3.ServicingError }
	for name, c := range map[string]struct {
		o, n *metal3.BareMetalHost
		want bool
	}{
		"registered (registering → inspecting)":  {host(metal3.StateRegistering, ok), host(metal3.StateInspecting, ok), true},
		"inspecting → preparing":                 {host(metal3.StateInspecting, ok), host(metal3.StatePreparing, ok), false},
		"preparing done (preparing → available)": {host(metal3.StatePreparing, ok), host(metal3.StateAvailable, ok), true},
		"available → provisioning":               {host(metal3.StateAvailable, ok), host(metal3.StateProvisioning, ok), false},
		"provisioning → provisioned":             {host(metal3.StateProvisioning, ok), host(metal3.StateProvisioned, ok), false},
		"provisioned → deprovisioning":           {host(metal3.StateProvisioned, ok), host(metal3.StateDeprovisioning, ok), false},
		"deprovisioning → available":             {host(metal3.StateDeprovisioning, ok), host(metal3.StateAvailable, ok), false},
		"servicing starts":                       {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, metal3.OperationalStatusServicing), false},
		"servicing done":                         {host(metal3.StateProvisioned, metal3.OperationalStatusServicing), host(metal3.StateProvisioned, ok), true},
		"servicing failed":                       {host(metal3.StateProvisioned, metal3.OperationalStatusServicing), host(metal3.StateProvisioned, metal3.OperationalStatusError), true},
		"servicing failed (servicing error: the values stay)": {host(metal3.StateProvisioned, metal3.OperationalStatusServicing),
			host(metal3.StateProvisioned, metal3.OperationalStatusError, servicingError), false},
		"failed servicing aborted": {host(metal3.StateProvisioned, metal3.OperationalStatusError, servicingError), host(metal3.StateProvisioned, ok), true},
		"paused":                   {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, ok, paused), true},
		"unpaused":                 {host(metal3.StateProvisioned, ok, paused), host(metal3.StateProvisioned, ok), true},
		"detached":                 {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, metal3.OperationalStatusDetached), true},
		"registered again on a new node (adopted)":    {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, ok, newNode), true},
		"nothing that matters (a power poll's write)": {host(metal3.StateProvisioned, ok), host(metal3.StateProvisioned, ok), false},
	} {
		if got := hostChangeMatters(c.o, c.n); got != c.want {
			t.Errorf("%s: wakes the companions = %v, want %v", name, got, c.want)
		}
	}
}

// TestSettled: only a companion whose values were read and whose change condition was computed
// for its current spec, and is False, may have its first read after a start put off.
func TestSettled(t *testing.T) {
	now := metav1.Now()
	cond := func(status metav1.ConditionStatus, generation int64) []metav1.Condition {
		return []metav1.Condition{{Type: "ChangeDetected", Status: status, ObservedGeneration: generation}}
	}
	for name, c := range map[string]struct {
		lastUpdated *metav1.Time
		conds       []metav1.Condition
		want        bool
	}{
		"read, judged, nothing to change":    {&now, cond(metav1.ConditionFalse, 2), true},
		"a change pending":                   {&now, cond(metav1.ConditionTrue, 2), false},
		"spec edited since it was judged":    {&now, cond(metav1.ConditionFalse, 1), false},
		"never read (created by its user)":   {nil, nil, false},
		"read, but the condition is missing": {&now, nil, false},
		"judged as unknown":                  {&now, cond(metav1.ConditionUnknown, 2), false},
	} {
		if got := Settled(c.lastUpdated, c.conds, "ChangeDetected", 2); got != c.want {
			t.Errorf("%s: Settled %v, want %v", name, got, c.want)
		}
	}
}

// TestNoHost: a companion without a host gets Valid False naming metadata.name and one Warning;
// looking again at the same object emits nothing more; only an owner reference to a
// BareMetalHost marks a companion as the controllers' own.
func TestNoHost(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	obj := &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "ns", Generation: 3}}
	var conds []metav1.Condition
	list := NoHost(&conds, "HostFirmwareSettings", "Valid", "ConfigurationError", obj, now)
	want := `metadata.name: no BareMetalHost named "w1" in namespace "ns"; a HostFirmwareSettings applies to the host of the same name`
	if len(list) != 1 || list[0].Reason != ReasonNoHost || list[0].Note != want {
		t.Errorf("events %+v, want one %s: %s", list, ReasonNoHost, want)
	}
	if len(conds) != 1 || conds[0].Type != "Valid" || conds[0].Status != metav1.ConditionFalse ||
		conds[0].Reason != "ConfigurationError" || conds[0].Message != want || conds[0].ObservedGeneration != 3 {
		t.Errorf("conditions %+v", conds)
	}
	obj.Generation = 4
	if list := NoHost(&conds, "HostFirmwareSettings", "Valid", "ConfigurationError", obj, now.Add(time.Minute)); len(list) != 0 {
		t.Errorf("a second look emitted %+v", list)
	}
	if conds[0].ObservedGeneration != 4 || !conds[0].LastTransitionTime.Time.Equal(now) {
		t.Errorf("after a second look %+v, want generation 4 and the first transition time", conds[0])
	}
	conds[0].Status = metav1.ConditionTrue // the host existed meanwhile
	if list := NoHost(&conds, "HostFirmwareSettings", "Valid", "ConfigurationError", obj, now); len(list) != 1 {
		t.Errorf("Valid True → no host emitted %+v, want a Warning", list)
	}

	// The host exists (registered or not): the mark goes, and only the mark.
	if !Unmark(&conds, "HostFirmwareSettings", "Valid", obj) || len(conds) != 0 {
		t.Errorf("Unmark left %+v", conds)
	}
	if Unmark(&conds, "HostFirmwareSettings", "Valid", obj) {
		t.Error("a second Unmark reported a mark")
	}
	invalid := conditions.False("Valid", "ConfigurationError", "Invalid BIOS setting: spec.settings.X: unknown")
	conditions.Set(&conds, invalid, 4, now)
	if Unmark(&conds, "HostFirmwareSettings", "Valid", obj) || len(conds) != 1 {
		t.Errorf("Unmark removed a validation failure: %+v", conds)
	}

	for name, c := range map[string]struct {
		refs []metav1.OwnerReference
		want bool
	}{
		"none":                 {nil, false},
		"a host":               {[]metav1.OwnerReference{{APIVersion: "metal3.io/v1alpha1", Kind: "BareMetalHost", Name: "w1"}}, true},
		"another kind":         {[]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "w1"}}, false},
		"another group's host": {[]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "BareMetalHost", Name: "w1"}}, false},
	} {
		obj.OwnerReferences = c.refs
		if got := OwnedByHost(obj); got != c.want {
			t.Errorf("%s: OwnedByHost = %v, want %v", name, got, c.want)
		}
	}
}
