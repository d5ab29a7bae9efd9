package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Timeouts for one step of one host: generous, because every host of the suite shares Ironic
// and two cores (with the rest of `go test ./...`).
const (
	stepTimeout   = 8 * time.Minute
	deleteTimeout = 5 * time.Minute
)

// TestE2E runs every scenario at once, then the ones that disturb everything (Ironic losing its
// database) and the checks over the whole run (no password anywhere).
func TestE2E(t *testing.T) {
	s := e2e(t)
	t.Run("scenarios", func(t *testing.T) {
		for i := range lifecycleHosts() {
			t.Run(fmt.Sprintf("lifecycle-%d", i), func(t *testing.T) {
				t.Parallel()
				s.lifecycle(t, s.namespace(t, "lifecycle"), i)
			})
		}
		for _, sc := range []struct {
			name string
			run  func(*testing.T, string)
		}{
			{"live-iso", s.liveISO},
			{"custom-deploy", s.customDeploy},
			{"reboot", s.reboot},
			{"detach", s.detach},
			{"wrong-credentials", s.wrongCredentials},
			{"bmc-failure", s.bmcFailure},
			{"provisioned-for-wipe", s.provisionedForWipe},
			{"live-update-settings", s.liveUpdateSettings},
			{"live-update-firmware", s.liveUpdateFirmware},
			{"preparation-retried", s.preparationRetried},
			{"data-image", s.dataImage},
			{"event-subscription", s.eventSubscription},
		} {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				sc.run(t, s.namespace(t, sc.name))
			})
		}
	})
	if t.Failed() {
		return
	}
	t.Run("ironic-database-wiped", s.databaseWiped)
	t.Run("no-password-anywhere", s.noPasswords)
}

// namespace creates a namespace for a scenario. It is never deleted: envtest runs no namespace
// controller, and a terminating namespace would refuse the Events and HardwareData the operator
// still writes for the hosts left there.
func (s *suite) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := s.c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// lifecycle takes one host through register → inspect → available → provision → provisioned →
// image removed → deprovision → available → delete, checking status, HardwareData, conditions,
// events, bmcsim and Ironic on the way. Even hosts use an md5 checksum, odd ones sha256.
func (s *suite) lifecycle(t *testing.T, ns string, i int) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	name := fmt.Sprintf("host-%d", i)
	img, path := s.diskImage(ns+"-"+name, i%2 == 0)
	start := time.Now()
	s.newHost(t, ns, name, srv, "", nil)

	h := s.waitState(t, ns, name, metal3.StateAvailable, stepTimeout)
	wantOperation(t, h, "register", h.Status.OperationHistory.Register, start)
	wantOperation(t, h, "inspect", h.Status.OperationHistory.Inspect, start)
	wantCondition(t, h, metal3.ManageableCondition, metav1.ConditionTrue)
	wantCondition(t, h, metal3.AvailableForProvisioningCondition, metav1.ConditionTrue)
	wantCondition(t, h, metal3.ProvisionedCondition, metav1.ConditionFalse)
	if h.Status.Provisioning.ID == "" || s.node(t, h.Status.Provisioning.ID) == nil {
		t.Errorf("%s: available, but Ironic has no node %q", name, h.Status.Provisioning.ID)
	}
	if h.Status.GoodCredentials.Reference == nil || h.Status.GoodCredentials.Reference.Name != h.Spec.BMC.CredentialsName {
		t.Errorf("%s: goodCredentials %+v, want the Secret %s", name, h.Status.GoodCredentials, h.Spec.BMC.CredentialsName)
	}
	s.checkHardware(t, ns, name, srv.Name)

	provStart := time.Now()
	s.patch(t, ns, name, func(h *metal3.BareMetalHost) { h.Spec.Image = &img })
	s.waitState(t, ns, name, metal3.StateProvisioned, stepTimeout)
	h = s.wait(t, ns, name, "powered on", time.Minute, func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
	if got := h.Status.Provisioning.Image; got.URL != img.URL || got.Checksum != img.Checksum || got.ChecksumType != img.ChecksumType {
		t.Errorf("%s: status.provisioning.image %+v, want %+v", name, got, img)
	}
	wantOperation(t, h, "provision", h.Status.OperationHistory.Provision, provStart)
	wantCondition(t, h, metal3.ProvisionedCondition, metav1.ConditionTrue)
	wantCondition(t, h, metal3.ReadyCondition, metav1.ConditionTrue)
	st := s.server(t, srv.Name)
	if st.State.DiskImage != img.URL || st.State.Power != "On" || st.State.Booted != "Hdd" {
		t.Errorf("%s: bmcsim after provisioning: disk %q power %s booted %q; want %q, On, Hdd", name,
			st.State.DiskImage, st.State.Power, st.State.Booted, img.URL)
	}
	if n := s.Images.Downloads(path); n < 1 {
		t.Errorf("%s: the image was never downloaded", name)
	}
	if n := s.node(t, h.Status.Provisioning.ID); n == nil || n.ProvisionState != "active" {
		t.Errorf("%s: Ironic node %s is not active: %+v", name, h.Status.Provisioning.ID, n)
	}

	deprovStart := time.Now()
	s.patch(t, ns, name, func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	s.wait(t, ns, name, "deprovisioning", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State != metal3.StateProvisioned
	})
	h = s.waitState(t, ns, name, metal3.StateAvailable, stepTimeout)
	wantOperation(t, h, "deprovision", h.Status.OperationHistory.Deprovision, deprovStart)
	wantCondition(t, h, metal3.ProvisionedCondition, metav1.ConditionFalse)
	if h.Status.Provisioning.Image.URL != "" {
		t.Errorf("%s: status.provisioning.image still %q after deprovisioning", name, h.Status.Provisioning.Image.URL)
	}
	if !seen(s.rec.history(ns, name, deprovStart), metal3.StateDeprovisioning) {
		t.Errorf("%s: never seen deprovisioning; history:%s", name, formatHistory(s.rec.history(ns, name, deprovStart)))
	}

	if i == 0 {
		s.reinspect(t, ns, name, srv.Name)
	}

	notes := transitionNotes(s.events(t, ns, name))
	for _, state := range []string{"registering", "inspecting", "available", "provisioning", "provisioned", "deprovisioning"} {
		if !strings.Contains(notes, state) {
			t.Errorf("%s: no state-change event names %s; notes: %s", name, state, notes)
		}
	}

	s.deleteHost(t, ns, name, deleteTimeout)
	for _, snap := range s.rec.history(ns, name, start) {
		if snap.errorType != "" {
			t.Errorf("%s: had an error during its lifecycle: %s", name, snap)
		}
	}
}

// reinspect asks an available host whose Ironic node is available (cleaned) for a new inspection
// with the inspect annotation. Ironic must take the node back to manageable first, which takes
// more than one reconcile: the request must survive that (it was lost until the annotation stayed
// until inspection started, and the host came back with its old inventory). The annotation goes,
// and Ironic's node has an inspection that finished after the request.
func (s *suite) reinspect(t *testing.T, ns, name, server string) {
	t.Helper()
	asked := time.Now()
	s.patch(t, ns, name, func(h *metal3.BareMetalHost) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metal3.InspectAnnotationPrefix] = ""
	})
	h := s.wait(t, ns, name, "inspected again", stepTimeout, func(h *metal3.BareMetalHost) bool {
		_, requested := h.Annotations[metal3.InspectAnnotationPrefix]
		op := h.Status.OperationHistory.Inspect
		return !requested && h.Status.Provisioning.State == metal3.StateAvailable && !op.Start.Time.Before(asked.Truncate(time.Second)) && !op.End.IsZero()
	})
	wantOperation(t, h, "inspect", h.Status.OperationHistory.Inspect, asked)
	if n := s.node(t, h.Status.Provisioning.ID); n == nil {
		t.Errorf("%s: no Ironic node %s after re-inspection", name, h.Status.Provisioning.ID)
	} else if n.InspectionFinishedAt == nil || n.InspectionFinishedAt.Before(asked) {
		t.Errorf("%s: re-inspection asked for at %s, but Ironic's node (%s) last finished an inspection at %v",
			name, asked.UTC().Format(time.RFC3339), n.ProvisionState, n.InspectionFinishedAt)
	}
	s.checkHardware(t, ns, name, server)
}

func seen(h []snapshot, state metal3.ProvisioningState) bool {
	return slices.ContainsFunc(h, func(s snapshot) bool { return s.state == state })
}

// checkHardware compares the host's HardwareData with what bmcsim says the server is made of.
func (s *suite) checkHardware(t *testing.T, ns, name, server string) {
	t.Helper()
	var hd metal3.HardwareData
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &hd); err != nil {
		t.Errorf("%s: reading HardwareData: %v", name, err)
		return
	}
	if !slices.Contains(hd.Finalizers, metal3.HardwareDataFinalizer) || len(hd.OwnerReferences) != 1 || hd.OwnerReferences[0].Name != name {
		t.Errorf("%s: HardwareData finalizers %v owners %+v, want the host's", name, hd.Finalizers, hd.OwnerReferences)
	}
	hw := hd.Spec.HardwareDetails
	if hw == nil {
		t.Errorf("%s: HardwareData has no hardware", name)
		return
	}
	inv := s.Sim.Fleet.ByName(server).Inventory()
	check := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: HardwareData %s = %v, bmcsim has %v", name, what, got, want)
		}
	}
	check("cpu.count", hw.CPU.Count, inv.CPU.Count)
	check("cpu.arch", hw.CPU.Arch, inv.CPU.Architecture)
	check("cpu.model", hw.CPU.Model, inv.CPU.ModelName)
	check("ramMebibytes", hw.RAMMebibytes, inv.Memory.PhysicalMB)
	check("systemVendor.manufacturer", hw.SystemVendor.Manufacturer, inv.SystemVendor.Manufacturer)
	check("systemVendor.productName", hw.SystemVendor.ProductName, inv.SystemVendor.ProductName)
	check("systemVendor.serialNumber", hw.SystemVendor.SerialNumber, inv.SystemVendor.SerialNumber)
	check("firmware.bios.version", hw.Firmware.BIOS.Version, inv.SystemVendor.Firmware.Version)
	if len(hw.Storage) != len(inv.Disks) {
		t.Errorf("%s: HardwareData has %d disks, bmcsim %d", name, len(hw.Storage), len(inv.Disks))
	} else {
		for i, d := range inv.Disks {
			check(fmt.Sprintf("storage[%d]", i),
				fmt.Sprint(hw.Storage[i].Name, hw.Storage[i].SizeBytes, hw.Storage[i].SerialNumber, hw.Storage[i].Model),
				fmt.Sprint(d.ByPath, d.Size, d.Serial, d.Model))
		}
	}
	if len(hw.NIC) != len(inv.Interfaces) {
		t.Errorf("%s: HardwareData has %d NICs, bmcsim %d", name, len(hw.NIC), len(inv.Interfaces))
	} else {
		for i, n := range inv.Interfaces {
			pxe := strings.EqualFold(n.MACAddress, inv.Boot.PXEInterface)
			check(fmt.Sprintf("nics[%d]", i),
				fmt.Sprint(hw.NIC[i].Name, strings.ToLower(hw.NIC[i].MAC), hw.NIC[i].SpeedGbps, hw.NIC[i].PXE),
				fmt.Sprint(n.Name, strings.ToLower(n.MACAddress), n.SpeedMbps/1000, pxe))
		}
	}
	h := s.get(t, ns, name)
	if h.Status.HardwareDetails == nil || h.Status.HardwareDetails.CPU.Arch != inv.CPU.Architecture {
		t.Errorf("%s: status.hardware %+v, want the CPU architecture %s", name, h.Status.HardwareDetails, inv.CPU.Architecture)
	}
}
