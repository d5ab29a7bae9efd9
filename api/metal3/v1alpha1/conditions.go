package v1alpha1

// Condition types and reasons. Values are metal3's, so that tools which wait on metal3
// conditions (kubectl wait --for=condition=..., CAPM3) keep working. Reasons are CamelCase as
// metav1.Condition requires.

// BareMetalHost condition types. The controller recomputes all of them from the host's state on
// every reconcile; they are never the source of truth.
const (
	// ManageableCondition says whether the host is registered with the provisioner and its BMC
	// answers.
	ManageableCondition = "Manageable"
	// ProvisionedCondition says whether an image (or custom deploy) is on the host.
	ProvisionedCondition = "Provisioned"
	// ReadyCondition summarises: provisioned and in a good operational status.
	ReadyCondition = "Ready"
	// AvailableForProvisioningCondition says whether the host can be given an image now.
	AvailableForProvisioningCondition = "AvailableForProvisioning"
	// ProgressingCondition says whether the host is in an intermediate state on its way to a
	// stable one.
	ProgressingCondition = "Progressing"
	// HealthyCondition carries the health the BMC reports (through the provisioner).
	HealthyCondition = "Healthy"
)

// Reasons of the Manageable condition (RegisteringReason is shared with Progressing).
const (
	// ManageableReason: registered and no power fault.
	ManageableReason = "Manageable"
	// NotManagedReason: the host is not managed (no BMC details, or detached).
	NotManagedReason = "NotManaged"
	// RegisteringReason: registration is in progress.
	RegisteringReason = "Registering"
	// RegistrationFailedReason: the provisioner could not register the host or reach its BMC.
	RegistrationFailedReason = "RegistrationFailed"
	// PowerFailureReason: the BMC failed to change the power state.
	PowerFailureReason = "PowerFailure"
)

// Reasons of the Provisioned condition (ProvisionedReason is shared with Ready, ProvisioningReason
// with Progressing).
const (
	// ProvisionedReason: the host is provisioned.
	ProvisionedReason = "Provisioned"
	// NotProvisionedReason: the host is neither provisioned nor provisioning.
	NotProvisionedReason = "NotProvisioned"
	// ProvisioningReason: an image is being written.
	ProvisioningReason = "Provisioning"
)

// Reasons of the Ready condition besides ProvisionedReason.
const (
	// ErrorReason: status.operationalStatus is error.
	ErrorReason = "Error"
	// DetachedReason: the host is detached.
	DetachedReason = "Detached"
	// ServicingReason: a live update is running.
	ServicingReason = "Servicing"
)

// Reasons of the AvailableForProvisioning condition (InspectingReason is shared with Progressing).
const (
	// AvailableReason: the host is available.
	AvailableReason = "Available"
	// NotManageableReason: the host is not manageable. The value really ends in "Reason" in
	// metal3; kept for compatibility.
	NotManageableReason = "NotManageableReason"
	// NotAvailableReason: the host is neither available nor inspecting.
	NotAvailableReason = "NotAvailable"
	// InspectingReason: hardware inspection is running.
	InspectingReason = "Inspecting"
)

// Reasons of the Progressing condition besides Registering, Inspecting and Provisioning.
const (
	// PreparingReason: RAID, BIOS settings or firmware updates are being applied.
	PreparingReason = "Preparing"
	// DeprovisioningReason: the image is being removed (cleaning).
	DeprovisioningReason = "Deprovisioning"
	// PoweringOffBeforeDeleteReason: the host is being powered off because it is being deleted.
	PoweringOffBeforeDeleteReason = "PoweringOffBeforeDelete"
	// DeletingReason: the host is being removed from the provisioner.
	DeletingReason = "Deleting"
	// NotProgressingReason: the host is in a stable state.
	NotProgressingReason = "NotProgressing"
)

// Reasons of the Healthy condition.
const (
	// HealthyReason: the BMC reports no problem.
	HealthyReason = "Healthy"
	// WarningHealthReason: the BMC reports warnings.
	WarningHealthReason = "Warning"
	// CriticalHealthReason: the BMC reports critical errors.
	CriticalHealthReason = "CriticalError"
	// UnknownHealthReason: health is not known (BMC or provisioner cannot tell).
	UnknownHealthReason = "Unknown"
)

// ImageStatusConditionType is a condition type of a PreprovisioningImage.
type ImageStatusConditionType string

// PreprovisioningImage condition types. Both carry ObservedGeneration: a Ready condition for an
// older generation does not make the image usable.
const (
	// ConditionImageReady: the image for the current spec is built and can be downloaded.
	ConditionImageReady ImageStatusConditionType = "Ready"
	// ConditionImageError: the image could not be built.
	ConditionImageError ImageStatusConditionType = "Error"
)

// PreprovisioningImage condition reasons.
const (
	// ImageSuccessReason: the image was built.
	ImageSuccessReason = "ImageSuccess"
	// ImageConfigurationErrorReason: the spec cannot be satisfied (for example no accepted format
	// can be built).
	ImageConfigurationErrorReason = "ConfigurationError"
	// ImageMissingNetworkDataReason: the Secret named by spec.networkDataName does not exist.
	ImageMissingNetworkDataReason = "MissingNetworkData"
	// ImageBuildInvalidReason: the build failed or produced an unusable image.
	ImageBuildInvalidReason = "ImageBuildInvalid"
)

// SettingsConditionType is a condition type of HostFirmwareSettings.
type SettingsConditionType string

// HostFirmwareSettings condition types.
const (
	// FirmwareSettingsChangeDetected: spec.settings differ from the settings read from the host.
	FirmwareSettingsChangeDetected SettingsConditionType = "ChangeDetected"
	// FirmwareSettingsValid: spec.settings are valid for the host's FirmwareSchema.
	FirmwareSettingsValid SettingsConditionType = "Valid"
)

// UpdatesConditionType is a condition type of HostFirmwareComponents.
type UpdatesConditionType string

// HostFirmwareComponents condition types.
const (
	// HostFirmwareComponentsChangeDetected: spec.updates differ from status.updates.
	HostFirmwareComponentsChangeDetected UpdatesConditionType = "ChangeDetected"
	// HostFirmwareComponentsValid: spec.updates name known components.
	HostFirmwareComponentsValid UpdatesConditionType = "Valid"
)

// Reasons of the ChangeDetected and Valid conditions of HostFirmwareSettings (metal3's
// reasonSuccess and reasonConfigurationError).
const (
	// FirmwareSuccessReason: the check passed.
	FirmwareSuccessReason = "Success"
	// FirmwareConfigurationErrorReason: the spec is invalid; the message names the setting and
	// the rule it breaks.
	FirmwareConfigurationErrorReason = "ConfigurationError"
)

// Reasons of the ChangeDetected and Valid conditions of HostFirmwareComponents (metal3 names them
// differently from HostFirmwareSettings').
const (
	// FirmwareComponentsValidReason: the updates name known components with usable URLs.
	FirmwareComponentsValidReason = "OK"
	// FirmwareComponentsInvalidReason: an update is invalid; the message names it and the rule
	// it breaks.
	FirmwareComponentsInvalidReason = "InvalidComponent"
)

// Live updates (servicing) of a BareMetalHost. metal3 has no condition for this; the type is
// Metalforge's and only appears when the provisioner cannot service.
const (
	// LiveUpdatesCondition is False when the host has live updates its HostUpdatePolicy allows
	// but the provisioner cannot apply them (an Ironic API older than servicing).
	LiveUpdatesCondition = "LiveUpdates"
	// ServicingUnsupportedReason: the provisioner cannot service provisioned hosts.
	ServicingUnsupportedReason = "ServicingUnsupported"
)

// A change of a BareMetalHost's registration that the provisioner keeps for later. metal3 has no
// condition for this; the type is Metalforge's and only appears while such a change waits.
const (
	// RegistrationPendingCondition is True while a change of an enrolled host's registration
	// (BMC access, disablePowerOff, preprovisioning network data...) has not reached the
	// provisioner, or waits there to be taken (Ironic refuses node updates while the node waits
	// for its agent). It is the record that makes the host register again until the change is
	// taken, after an operator restart too.
	RegistrationPendingCondition = "RegistrationPending"
	// RegistrationDeferredReason: the provisioner deferred the change.
	RegistrationDeferredReason = "Deferred"
	// RegistrationNotSentReason: the registration that sends the change did not finish (the
	// provisioner unavailable or busy, an internal error); it is sent again.
	RegistrationNotSentReason = "NotSent"
)
