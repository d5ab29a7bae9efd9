package host

import (
	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
)

// This file is the state machine's declaration: the transitions (every edge a host may take) and,
// for every state, one row with everything the controller knows about that state. Nothing else in
// the package keeps per-state facts; code asks the row (stateOf). A test fails when a row lacks a
// field, so a new state or a new fact cannot be half declared.

// Triggers shared by several transitions.
const (
	triggerDeleted         = "host deleted"
	triggerDeletedDetached = "host deleted while detached (skips power off and deprovisioning)"
	// triggerImageFailedWhileDeleting: cleaning needs the agent, whose image cannot be built.
	triggerImageFailedWhileDeleting = "host deleted and its agent image cannot be built (no cleaning)"
)

// Transition is one declared edge of the state machine. The handlers may only move a host along
// these edges (moveTo refuses anything else), and the diagram in docs/ is generated from them.
type Transition struct {
	From, To metal3.ProvisioningState
	Trigger  string
}

// Transitions is THE table: every way a host can change state, as metal3 defines them.
var Transitions = []Transition{
	{metal3.StateNone, metal3.StateRegistering, "BMC address or credentials set"},
	{metal3.StateNone, metal3.StateUnmanaged, "no BMC details (operationalStatus discovered)"},
	{metal3.StateUnmanaged, metal3.StateRegistering, "BMC details added"},
	{metal3.StateRegistering, metal3.StateExternallyProvisioned, "registered, spec.externallyProvisioned"},
	{metal3.StateRegistering, metal3.StatePreparing, "registered, inspection disabled"},
	{metal3.StateRegistering, metal3.StateInspecting, "registered"},
	{metal3.StateInspecting, metal3.StatePreparing, "inspection done, HardwareData written"},
	{metal3.StateMatchProfile, metal3.StatePreparing, "legacy state, moves on at once"},
	{metal3.StatePreparing, metal3.StateAvailable, "RAID, root device hints and firmware changes applied"},
	{metal3.StateReady, metal3.StateAvailable, "legacy name of available"},
	{metal3.StateAvailable, metal3.StateExternallyProvisioned, "spec.externallyProvisioned set"},
	{metal3.StateAvailable, metal3.StateInspecting, "inspect.metal3.io annotation (re-inspection)"},
	{metal3.StateAvailable, metal3.StatePreparing, "spec.raid or spec.rootDeviceHints differ from status, or a firmware change made since the host's last preparation"},
	{metal3.StateAvailable, metal3.StateProvisioning, "online, image or custom deploy not yet provisioned, retry cap not reached"},
	{metal3.StateProvisioning, metal3.StateProvisioned, "image written"},
	{metal3.StateProvisioning, metal3.StateDeprovisioning, "provisioning failed (provisioningFailCount+1), or image or custom deploy removed or changed"},
	{metal3.StateProvisioned, metal3.StateDeprovisioning, "image or custom deploy changed or removed"},
	{metal3.StateExternallyProvisioned, metal3.StateProvisioned, "spec.externallyProvisioned cleared"},
	{metal3.StateDeprovisioning, metal3.StateAvailable, "image removed (cleaning done)"},
	{metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, "deprovisioned while deleting, or failed more than 3 times while deleting"},
	{metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, triggerImageFailedWhileDeleting},
	{metal3.StatePoweringOffBeforeDelete, metal3.StateDeleting, "powered off, power off disabled, failed more than 3 times, or never registered"},
	// Deletion entry (checkInitiateDelete in metal3).
	{metal3.StateNone, metal3.StateDeleting, triggerDeleted},
	{metal3.StateUnmanaged, metal3.StateDeleting, triggerDeleted},
	{metal3.StateRegistering, metal3.StateDeleting, triggerDeleted},
	{metal3.StateProvisioning, metal3.StateDeprovisioning, triggerDeleted},
	{metal3.StateProvisioned, metal3.StateDeprovisioning, triggerDeleted},
	{metal3.StateInspecting, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateMatchProfile, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StatePreparing, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateReady, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateAvailable, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateExternallyProvisioned, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateDeprovisioning, metal3.StateDeleting, "host deleted, registration failed more than 3 times or never registered"},
	// Detached hosts skip power off and deprovisioning (any state: force detaches from any).
	{metal3.StateInspecting, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateMatchProfile, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateReady, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StatePreparing, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateAvailable, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateProvisioning, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateProvisioned, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateExternallyProvisioned, metal3.StateDeleting, triggerDeletedDetached},
}

// yesNo is a yes/no fact of a state row. Its zero value is "not declared", so the completeness test
// can tell a forgotten field from a deliberate no.
type yesNo int8

const (
	unset yesNo = iota
	no
	yes
)

func (f yesNo) is() bool { return f == yes }

// stateRow is everything the controller knows about one provisioning state.
type stateRow struct {
	// handler runs the state (handlers_*.go).
	handler stateHandler
	// busy: entering the state starts a long provisioner operation, which needs provisioner
	// capacity (operationalStatus delayed otherwise), except on the way to deletion.
	busy yesNo
	// registered: the handler talks to the provisioner about an enrolled node, so the node must
	// exist (and know the current credentials) before it runs (ensureRegistered).
	registered yesNo
	// pastProvisioning: the host is provisioned or on its way out; inputs that only provisioning
	// uses (user, network and meta data) are not read any more. (The preprovisioning network data
	// is, while the host is registered: a lost node is enrolled again with it.)
	pastProvisioning yesNo
	// mayPrepare: a reconcile starting here may reach preparing, so pending firmware changes are
	// read before the handlers run.
	mayPrepare yesNo
	// detachable: the detached annotation takes effect here without force (metal3's list).
	detachable yesNo
	// liveUpdates: the host runs with its image here and may be serviced: pending firmware
	// changes its HostUpdatePolicy allows are applied on its next reboot (servicing.go), and the
	// changes and the policy are read before the handlers run.
	liveUpdates yesNo
	// writeOnLeave: leaving the state ends the reconcile, so that the status saying it was left is
	// written before the next state's handler acts. Deprovisioning undoes a deployment: had its
	// end not been written when a reconcile went on to deploy again (available, provisioning) and
	// the operator died, the next operator would find the host still deprovisioning and undeploy
	// the new deployment, writing the disk once more (the fault campaign's finding 3,
	// docs/fault-campaign.md). It costs one status write per re-provisioned host.
	writeOnLeave yesNo
	// conditions: what the state says about the host's conditions (setConditions).
	conditions stateConditions
	// enterReason is the reason of the Event for a host entering the state.
	enterReason string
	// agentImage is what the state needs of the host's PreprovisioningImage, with
	// --build-preprov-image (agentimage.go): nothing, its deletion, the image kept in sync, or
	// the image ready before the handler runs (the state boots the agent from it).
	agentImage agentImage
}

// states has one row per provisioning state. match profile and ready are legacy names that move on
// at once. (Filled in init: the handlers refer back to the table through run.)
var states map[metal3.ProvisioningState]stateRow

func init() {
	states = map[metal3.ProvisioningState]stateRow{
		metal3.StateNone: {
			handler: handleNone, busy: no, registered: no, pastProvisioning: no, mayPrepare: yes, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{false, metal3.NotProvisionedReason, metal3.NotManageableReason, metal3.NotProgressingReason, ""},
			enterReason: reasonStateChanged,
			agentImage:  imageAlways(imageLeft),
		},
		metal3.StateUnmanaged: {
			handler: handleUnmanaged, busy: no, registered: no, pastProvisioning: no, mayPrepare: no, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{false, metal3.NotProvisionedReason, metal3.NotManageableReason, metal3.NotProgressingReason, ""},
			enterReason: reasonDiscovered,
			agentImage:  imageAlways(imageLeft),
		},
		metal3.StateRegistering: {
			handler: handleRegistering, busy: no, registered: no, pastProvisioning: no, mayPrepare: yes, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{false, metal3.NotProvisionedReason, metal3.NotManageableReason, metal3.RegisteringReason, "registration with the provisioner"},
			enterReason: reasonRegistering,
			agentImage:  registeringImage,
		},
		metal3.StateInspecting: {
			handler: handleInspecting, busy: yes, registered: yes, pastProvisioning: no, mayPrepare: yes, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.InspectingReason, metal3.InspectingReason, "hardware inspection"},
			enterReason: reasonInspectionStarted,
			agentImage:  inspectingImage,
		},
		metal3.StateMatchProfile: {
			handler: handleMatchProfile, busy: no, registered: yes, pastProvisioning: no, mayPrepare: yes, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.NotAvailableReason, metal3.PreparingReason, "preparation"},
			enterReason: reasonStateChanged,
			agentImage:  imageAlways(imageKept),
		},
		metal3.StatePreparing: {
			handler: handlePreparing, busy: yes, registered: yes, pastProvisioning: no, mayPrepare: yes, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.NotAvailableReason, metal3.PreparingReason, "preparation (RAID, root device hints, firmware)"},
			enterReason: reasonPreparationStarted,
			agentImage:  imageAlways(imageBooted),
		},
		metal3.StateReady: {
			handler: handleReady, busy: no, registered: yes, pastProvisioning: no, mayPrepare: no, detachable: yes, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.AvailableReason, metal3.NotProgressingReason, ""},
			enterReason: reasonStateChanged,
			agentImage:  imageAlways(imageKept),
		},
		metal3.StateAvailable: {
			handler: handleAvailable, busy: no, registered: yes, pastProvisioning: no, mayPrepare: yes, detachable: yes, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.AvailableReason, metal3.NotProgressingReason, ""},
			enterReason: reasonAvailable,
			agentImage:  imageAlways(imageKept),
		},
		metal3.StateProvisioning: {
			handler: handleProvisioning, busy: yes, registered: yes, pastProvisioning: no, mayPrepare: no, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.ProvisioningReason, metal3.NotAvailableReason, metal3.ProvisioningReason, "provisioning"},
			enterReason: reasonProvisioningStarted,
			agentImage:  provisioningImage,
		},
		metal3.StateProvisioned: {
			handler: handleProvisioned, busy: no, registered: yes, pastProvisioning: yes, mayPrepare: no, detachable: yes, liveUpdates: yes, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.ProvisionedReason, metal3.NotAvailableReason, metal3.NotProgressingReason, ""},
			enterReason: reasonProvisioningComplete,
			agentImage:  servicingImage,
		},
		metal3.StateExternallyProvisioned: {
			handler: handleExternallyProvisioned, busy: no, registered: yes, pastProvisioning: yes, mayPrepare: no, detachable: yes, liveUpdates: yes, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.ProvisionedReason, metal3.NotAvailableReason, metal3.NotProgressingReason, ""},
			enterReason: reasonExternallyProvisioned,
			agentImage:  servicingImage,
		},
		metal3.StateDeprovisioning: {
			handler: handleDeprovisioning, busy: yes, registered: yes, pastProvisioning: yes, mayPrepare: no, detachable: no, liveUpdates: no, writeOnLeave: yes,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.NotAvailableReason, metal3.DeprovisioningReason, "deprovisioning (cleaning)"},
			enterReason: reasonDeprovisioningStarted,
			agentImage:  deprovisioningImage,
		},
		metal3.StatePoweringOffBeforeDelete: {
			handler: handlePoweringOffBeforeDelete, busy: no, registered: yes, pastProvisioning: yes, mayPrepare: no, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{true, metal3.NotProvisionedReason, metal3.NotAvailableReason, metal3.PoweringOffBeforeDeleteReason, "power off before deletion"},
			enterReason: reasonPoweringOffForDelete,
			agentImage:  imageAlways(imageDeleted),
		},
		metal3.StateDeleting: {
			handler: handleDeleting, busy: no, registered: no, pastProvisioning: yes, mayPrepare: no, detachable: no, liveUpdates: no, writeOnLeave: no,
			conditions:  stateConditions{false, metal3.NotProvisionedReason, metal3.NotAvailableReason, metal3.DeletingReason, "removal from the provisioner"},
			enterReason: reasonDeleting,
			agentImage:  imageAlways(imageDeleted),
		},
	}
}

// stateOf returns the row of a state; an unknown state (written by something else) reads as a
// host never looked at.
func stateOf(s metal3.ProvisioningState) stateRow {
	if row, ok := states[s]; ok {
		return row
	}
	return states[metal3.StateNone]
}

// deletionEdges is where deleting a host moves it from each state: the table's edges triggered by
// the deletion alone (metal3's checkInitiateDelete). States without one (deprovisioning, powering
// off before delete, deleting) are already on the way out.
var deletionEdges = func() map[metal3.ProvisioningState]metal3.ProvisioningState {
	m := map[metal3.ProvisioningState]metal3.ProvisioningState{}
	for _, t := range Transitions {
		if t.Trigger == triggerDeleted {
			m[t.From] = t.To
		}
	}
	return m
}()

// imageUse is what a state needs of the host's PreprovisioningImage (with --build-preprov-image).
type imageUse int8

const (
	// imageLeft: the state neither needs the image nor removes it. (The zero value is no use: a
	// row without agentImage fails the completeness test.)
	imageLeft imageUse = iota + 1
	// imageDeleted: the host is done with the agent (provisioned, or on its way out); its image is
	// deleted, as an image builder may keep every image (or its configuration) in memory (seed 001).
	imageDeleted
	// imageKept: the image is created and kept in sync with the host, and handed to the provisioner
	// once ready, but nothing waits for it.
	imageKept
	// imageBooted: the state boots the agent: its handler runs only once the image is ready.
	imageBooted
)

// agentImage is a row's image fact; some states' needs depend on the host's spec.
type agentImage func(h *metal3.BareMetalHost) imageUse

// needed: the image is created and kept in sync.
func (u imageUse) needed() bool { return u == imageKept || u == imageBooted }

func imageAlways(u imageUse) agentImage { return func(*metal3.BareMetalHost) imageUse { return u } }

// registeringImage: a host that will be inspected or prepared gets its image built while it
// registers (handleRegistering waits for it before moving on: registration completes with an
// agent to boot, as seed 002 has it); an externally provisioned host never boots the agent.
func registeringImage(h *metal3.BareMetalHost) imageUse {
	if h.Spec.ExternallyProvisioned {
		return imageLeft
	}
	return imageKept
}

// inspectingImage: fast inspection reads the BMC instead of booting the agent (when the BMC can:
// the provisioner inspects with the agent otherwise, for a host admitted before the webhook
// refused that); an inspection disabled while the host inspected boots nothing more
// (skipInspection), but the preparing that follows may: kept.
func inspectingImage(h *metal3.BareMetalHost) imageUse {
	if fastInspection(h) || h.InspectionDisabled() {
		return imageKept
	}
	return imageBooted
}

// provisioningImage: writing an image, a custom deploy and automated cleaning run on the agent; a
// live ISO without cleaning boots the user's ISO only.
func provisioningImage(h *metal3.BareMetalHost) imageUse {
	if h.Spec.Image.IsLiveISO() && h.Spec.AutomatedCleaningMode == metal3.CleaningModeDisabled {
		return imageKept
	}
	return imageBooted
}

// deprovisioningImage: cleaning boots the agent; without cleaning nothing does.
func deprovisioningImage(h *metal3.BareMetalHost) imageUse {
	if h.Spec.AutomatedCleaningMode == metal3.CleaningModeDisabled {
		return imageLeft
	}
	return imageBooted
}

// servicingImage is the live-update hook: a provisioned host boots the agent only while a live
// update runs or failed (servicing.go: a changed request starts it again, and the provisioner
// boots the agent then); otherwise its image is deleted. The host waits for the image after
// operationalStatus turned servicing, before the provisioner is asked to service.
func servicingImage(h *metal3.BareMetalHost) imageUse {
	if h.Status.OperationalStatus == metal3.OperationalStatusServicing || h.Status.ErrorType == metal3.ServicingError {
		return imageBooted
	}
	return imageDeleted
}

// fastInspection: spec.inspectionMode fast, and a BMC that inspects out-of-band.
func fastInspection(h *metal3.BareMetalHost) bool {
	if h.Spec.InspectionMode != metal3.InspectionModeFast {
		return false
	}
	access, err := bmc.Parse(h.Spec.BMC.Address)
	return err == nil && access.Interfaces.Inspect != ""
}
