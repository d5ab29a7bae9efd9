package clusteroperator

import (
	"slices"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Name is the ClusterOperator's name.
const Name = "baremetal"

// OperatorVersionName is the versions entry of the operator itself.
const OperatorVersionName = "operator"

// Disabled is the condition type of a platform where the operator has nothing to do.
const Disabled configv1.ClusterStatusConditionType = "Disabled"

// Reasons, as OpenShift's cluster-baremetal-operator writes them.
const (
	// ReasonUnsupportedPlatform: the platform gets no provisioning stack.
	ReasonUnsupportedPlatform = "UnsupportedPlatform"
	// ReasonWaitingForProvisioningCR: nothing to deploy until the Provisioning object exists.
	ReasonWaitingForProvisioningCR = "WaitingForProvisioningCR"
	// ReasonSyncing: objects are being created or changed, or a rollout is under way.
	ReasonSyncing = "SyncingResources"
	// ReasonDeployComplete: every Deployment of the stack is available at the current spec.
	ReasonDeployComplete = "DeployComplete"
	// ReasonInvalidConfiguration: the Provisioning spec or the images file is wrong.
	ReasonInvalidConfiguration = "InvalidConfiguration"
	// ReasonDeployTimedOut: a Deployment did not finish its rollout in time.
	ReasonDeployTimedOut = "DeployTimedOut"
	// ReasonDeploymentCrashLooping: a Deployment whose rollout finished has been unavailable for
	// too long (its pod crash-loops, or cannot run again). OpenShift's operator defines this
	// reason (Available False, Degraded True) and never sets it; Kubernetes reports nothing then
	// (its progress deadline holds only during a rollout), so without it the stack would look
	// Progressing forever.
	ReasonDeploymentCrashLooping = "DeploymentCrashLooping"
	// ReasonSyncError: the API server has refused the stack's writes for minutes (an immutable
	// Secret, a value its validation refuses). Ours: OpenShift's operator returns the error and
	// leaves the ClusterOperator as it was, so nothing told the administrator.
	ReasonSyncError = "SyncError"
	// ReasonResourceNotFound: the stack is gone (the Provisioning object was deleted).
	ReasonResourceNotFound = "ResourceNotFound"
	// ReasonAsExpected is the reason of a condition with nothing to report.
	ReasonAsExpected = "AsExpected"
	// ReasonHostsBusy: Upgradeable=False because hosts are in an operation an upgrade (which
	// restarts Ironic) would interrupt. Ours: OpenShift's operator never sets Upgradeable=False.
	ReasonHostsBusy = "HostsBusy"
	// ReasonUpgrading: Progressing while the operator moves to a new release version.
	ReasonUpgrading = "Upgrading"
)

// State is the operator's situation, decided by the controller.
type State struct {
	// Reason is one of the table's rows.
	Reason string
	// Message details the row (the validation errors for InvalidConfiguration, what runs for
	// DeployComplete); the row's default when empty.
	Message string
	// Progress is the Progressing message when the row is progressing; the row's default when
	// empty.
	Progress string
	// Busy, when not empty, makes Upgradeable False with this message.
	Busy string
	// AtLevel: the operands run at this release's version (the stack is deployed, or there is
	// nothing to deploy), so versions may name it.
	AtLevel bool
}

// row is what a reason says about each condition, and the default messages.
type row struct {
	available, progressing, degraded, disabled configv1.ConditionStatus
	message, progress                          string
}

const (
	t = configv1.ConditionTrue
	f = configv1.ConditionFalse
)

// Table is the conditions of each reason (OpenShift's, with ResourceNotFound not Degraded since
// OCPBUGS-56723: the stack missing at startup is not a failure).
var Table = map[string]row{
	ReasonUnsupportedPlatform:      {available: t, progressing: f, degraded: f, disabled: t, message: "Nothing to do on this Platform"},
	ReasonWaitingForProvisioningCR: {available: t, progressing: f, degraded: f, disabled: f, message: "Waiting for Provisioning CR"},
	ReasonSyncing:                  {available: t, progressing: t, degraded: f, disabled: f, message: "Applying metal3 resources", progress: "Applying metal3 resources"},
	ReasonDeployComplete:           {available: t, progressing: f, degraded: f, disabled: f, message: "metal3 and baremetal-operator are running"},
	ReasonInvalidConfiguration:     {available: t, progressing: t, degraded: t, disabled: f, message: "invalid configuration", progress: "Unable to apply Provisioning CR: invalid configuration"},
	ReasonDeployTimedOut:           {available: t, progressing: t, degraded: t, disabled: f, message: "metal3 deployment rollout taking too long", progress: "Waiting for the rollout"},
	ReasonDeploymentCrashLooping:   {available: f, progressing: f, degraded: t, disabled: f, message: "metal3 deployment unavailable"},
	ReasonSyncError:                {available: t, progressing: t, degraded: t, disabled: f, message: "applying the stack failed", progress: "Unable to apply the stack"},
	ReasonResourceNotFound:         {available: f, progressing: t, degraded: f, disabled: f, message: "all Metal3 resources deleted", progress: "Waiting for Provisioning CR"},
}

// Degrades reports whether reason's row makes Degraded True.
func Degrades(reason string) bool {
	r, ok := Table[reason]
	return ok && r.degraded == t
}

// Said is the state's message: its own, or its row's default.
func (s State) Said() string {
	if s.Message != "" {
		return s.Message
	}
	return Table[s.Reason].message
}

// Apply sets co's conditions, versions and related objects for state and reports whether
// anything changed. releaseVersion is the operator's release (RELEASE_VERSION); versions take it
// once the state is at level, and until then Progressing says an upgrade is under way.
func Apply(co *configv1.ClusterOperator, s State, releaseVersion string, related []configv1.ObjectReference, now time.Time) bool {
	r, ok := Table[s.Reason]
	if !ok {
		panic("clusteroperator: no row for reason " + s.Reason) // a programming error, caught by the table tests
	}
	message := r.message
	if s.Message != "" {
		message = s.Message
	}
	progress := r.progress
	if s.Progress != "" {
		progress = s.Progress
	}
	current := operatorVersion(co)
	upgrading := releaseVersion != "" && current != "" && current != releaseVersion && !s.AtLevel

	conds := []configv1.ClusterOperatorStatusCondition{
		cond(configv1.OperatorAvailable, r.available, s.Reason, message, true), // True or False, it says why
		cond(configv1.OperatorProgressing, r.progressing, s.Reason, progress, r.progressing == t),
		cond(configv1.OperatorDegraded, r.degraded, s.Reason, message, r.degraded == t),
		cond(Disabled, r.disabled, s.Reason, message, r.disabled == t),
		{Type: configv1.OperatorUpgradeable, Status: t, Reason: ReasonAsExpected},
	}
	if s.Reason == ReasonUnsupportedPlatform {
		conds[0] = configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorAvailable, Status: t, Reason: ReasonAsExpected, Message: "Operational"}
	}
	if upgrading && r.progressing == f {
		conds[1] = configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorProgressing, Status: t, Reason: ReasonUpgrading,
			Message: "Upgrading from " + current + " to " + releaseVersion}
	}
	if s.Busy != "" {
		conds[4] = configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorUpgradeable, Status: f, Reason: ReasonHostsBusy, Message: s.Busy}
	}

	changed := false
	for _, c := range conds {
		changed = setCondition(&co.Status.Conditions, c, now) || changed
	}
	if s.AtLevel && releaseVersion != "" && current != releaseVersion {
		co.Status.Versions = setVersion(co.Status.Versions, releaseVersion)
		changed = true
	}
	if !slices.Equal(co.Status.RelatedObjects, related) {
		co.Status.RelatedObjects = slices.Clone(related)
		changed = true
	}
	return changed
}

// cond builds a condition; one with nothing to report gets AsExpected and no message.
func cond(typ configv1.ClusterStatusConditionType, status configv1.ConditionStatus, reason, message string, interesting bool) configv1.ClusterOperatorStatusCondition {
	if !interesting {
		return configv1.ClusterOperatorStatusCondition{Type: typ, Status: status, Reason: ReasonAsExpected}
	}
	return configv1.ClusterOperatorStatusCondition{Type: typ, Status: status, Reason: reason, Message: message}
}

// setCondition puts c into conds; the transition time moves when the status changes (or the
// condition is new). Times are truncated to seconds, as the API server stores them.
func setCondition(conds *[]configv1.ClusterOperatorStatusCondition, c configv1.ClusterOperatorStatusCondition, now time.Time) bool {
	at := metav1.NewTime(now.Truncate(time.Second))
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return false
		}
		if old.Status != c.Status {
			old.LastTransitionTime = at
		}
		old.Status, old.Reason, old.Message = c.Status, c.Reason, c.Message
		return true
	}
	c.LastTransitionTime = at
	*conds = append(*conds, c)
	return true
}

// Condition returns the condition of type typ, or nil.
func Condition(co *configv1.ClusterOperator, typ configv1.ClusterStatusConditionType) *configv1.ClusterOperatorStatusCondition {
	for i := range co.Status.Conditions {
		if co.Status.Conditions[i].Type == typ {
			return &co.Status.Conditions[i]
		}
	}
	return nil
}

func operatorVersion(co *configv1.ClusterOperator) string {
	for _, v := range co.Status.Versions {
		if v.Name == OperatorVersionName {
			return v.Version
		}
	}
	return ""
}

func setVersion(versions []configv1.OperandVersion, v string) []configv1.OperandVersion {
	out := slices.Clone(versions)
	for i := range out {
		if out[i].Name == OperatorVersionName {
			out[i].Version = v
			return out
		}
	}
	return append(out, configv1.OperandVersion{Name: OperatorVersionName, Version: v})
}
