package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProvisioningState is where a host is in its lifecycle (status.provisioning.state). There is no
// error state: errors are operationalStatus "error" plus errorType, in any state.
type ProvisioningState string

const (
	// StateNone is a new host the controller has not looked at yet.
	StateNone ProvisioningState = ""
	// StateUnmanaged is a host without enough BMC details to register it.
	StateUnmanaged ProvisioningState = "unmanaged"
	// StateRegistering is a host being enrolled with the provisioner and its BMC access checked.
	StateRegistering ProvisioningState = "registering"
	// StateMatchProfile used to assign a hardware profile; it now moves straight on.
	StateMatchProfile ProvisioningState = "match profile"
	// StateInspecting is a host whose hardware is being inspected.
	StateInspecting ProvisioningState = "inspecting"
	// StatePreparing is a host getting RAID, BIOS settings and firmware updates applied.
	StatePreparing ProvisioningState = "preparing"
	// StateReady is the old name of StateAvailable, still accepted and handled like it.
	//
	// Deprecated: use StateAvailable.
	StateReady ProvisioningState = "ready"
	// StateAvailable is a host ready to be provisioned.
	StateAvailable ProvisioningState = "available"
	// StateProvisioning is a host whose image is being written.
	StateProvisioning ProvisioningState = "provisioning"
	// StateProvisioned is a host running the image it was given.
	StateProvisioned ProvisioningState = "provisioned"
	// StateExternallyProvisioned is a host whose image was put there by something else; only its
	// power is managed.
	StateExternallyProvisioned ProvisioningState = "externally provisioned"
	// StateDeprovisioning is a host whose image is being removed (cleaning).
	StateDeprovisioning ProvisioningState = "deprovisioning"
	// StatePoweringOffBeforeDelete is a host being turned off because it is being deleted.
	StatePoweringOffBeforeDelete ProvisioningState = "powering off before delete"
	// StateDeleting is a host being removed from the provisioner before its finalizer goes.
	StateDeleting ProvisioningState = "deleting"
)

// OperationalStatus is the health of the host's management (status.operationalStatus).
// +kubebuilder:validation:Enum="";OK;discovered;error;delayed;detached;servicing
type OperationalStatus string

const (
	// OperationalStatusOK: manageable and no error.
	OperationalStatusOK OperationalStatus = "OK"
	// OperationalStatusDiscovered: only partly configured (no BMC details).
	OperationalStatusDiscovered OperationalStatus = "discovered"
	// OperationalStatusError: the last operation failed; see errorType and errorMessage.
	OperationalStatusError OperationalStatus = "error"
	// OperationalStatusDelayed: waiting because the provisioner works on too many hosts at once.
	OperationalStatusDelayed OperationalStatus = "delayed"
	// OperationalStatusDetached: removed from the provisioner by the detached annotation.
	OperationalStatusDetached OperationalStatus = "detached"
	// OperationalStatusServicing: a live update (firmware settings or updates) is running.
	OperationalStatusServicing OperationalStatus = "servicing"
)

// ErrorType is the class of the last failure (status.errorType).
//
// The enum includes "detach error": metal3's Go code sets it but its CRD enum forgot it, so a
// failed detach could not be written to status there.
// +kubebuilder:validation:Enum="provisioned registration error";"registration error";"inspection error";"preparation error";"provisioning error";"power management error";"servicing error";"detach error"
type ErrorType string

const (
	// ProvisionedRegistrationError: an already provisioned host could not be registered again.
	ProvisionedRegistrationError ErrorType = "provisioned registration error"
	// RegistrationError: the host could not be registered or its BMC reached.
	RegistrationError ErrorType = "registration error"
	// InspectionError: inspection failed.
	InspectionError ErrorType = "inspection error"
	// PreparationError: preparing (RAID, BIOS, firmware) failed.
	PreparationError ErrorType = "preparation error"
	// ProvisioningError: provisioning or deprovisioning failed.
	ProvisioningError ErrorType = "provisioning error"
	// PowerManagementError: the power state could not be changed.
	PowerManagementError ErrorType = "power management error"
	// ServicingError: a live update failed.
	ServicingError ErrorType = "servicing error"
	// DetachError: the host could not be detached from the provisioner.
	DetachError ErrorType = "detach error"
)

// BareMetalHostStatus is the observed state of a host. Only the host controller writes it.
type BareMetalHostStatus struct {
	// OperationalStatus is the health of the host's management.
	OperationalStatus OperationalStatus `json:"operationalStatus"`

	// ErrorType is the class of the last failure while operationalStatus is error.
	ErrorType ErrorType `json:"errorType,omitempty"`

	// LastUpdated is when the status was last written.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`

	// HardwareProfile is the matched hardware profile.
	//
	// Deprecated: profiles are not used.
	HardwareProfile string `json:"hardwareProfile,omitempty"`

	// HardwareDetails is the inspected hardware.
	//
	// Deprecated: read the HardwareData of the same name instead.
	HardwareDetails *HardwareDetails `json:"hardware,omitempty"`

	// Provisioning is what the provisioner is doing with the host.
	Provisioning ProvisionStatus `json:"provisioning"`

	// GoodCredentials are the last BMC credentials that worked.
	GoodCredentials CredentialsStatus `json:"goodCredentials,omitempty"`

	// TriedCredentials are the last BMC credentials sent to the provisioner.
	TriedCredentials CredentialsStatus `json:"triedCredentials,omitempty"`

	// ErrorMessage is the last error reported, safe to show (no credentials).
	ErrorMessage string `json:"errorMessage"`

	// PoweredOn is the last observed power state; it can lag behind the hardware while an
	// operation runs.
	PoweredOn bool `json:"poweredOn"`

	// OperationHistory records when registration, inspection, provisioning and deprovisioning
	// last started and ended.
	OperationHistory OperationHistory `json:"operationHistory,omitempty"`

	// ErrorCount counts errors since the last successful operation; it drives the retry backoff.
	// +kubebuilder:default=0
	ErrorCount int `json:"errorCount"`

	// ProvisioningFailCount counts consecutive failed provisioning attempts of the current image.
	// Unlike errorCount it survives deprovisioning; it is reset by success or a new image, and
	// caps provision/deprovision loops.
	// +optional
	// +kubebuilder:default=0
	ProvisioningFailCount int `json:"provisioningFailCount"`

	// LastAttemptedImage is the image of the last provisioning attempt, to tell a user's image
	// change (which resets provisioningFailCount) from a retry.
	// +optional
	LastAttemptedImage *Image `json:"lastAttemptedImage,omitempty"`

	// LastAttemptedCustomDeploy is the custom deploy of the last provisioning attempt: a change
	// of spec.customDeploy resets provisioningFailCount as an image change does.
	// +optional
	LastAttemptedCustomDeploy *CustomDeploy `json:"lastAttemptedCustomDeploy,omitempty"`

	// Conditions are recomputed from the host's state on every reconcile.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProvisionStatus is what the provisioner does or did with the host.
type ProvisionStatus struct {
	// State is where the host is in its lifecycle.
	State ProvisioningState `json:"state"`

	// ID is the provisioner's identifier of the host (the Ironic node UUID). The JSON key is
	// upper case, as in metal3.
	ID string `json:"ID"` //nolint:tagliatelle // wire compatibility with metal3

	// Image is the last image successfully provisioned.
	Image Image `json:"image,omitempty"`

	// RootDeviceHints are the hints used for the current image.
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`

	// BootMode is the boot mode used for the current image.
	BootMode BootMode `json:"bootMode,omitempty"`

	// RAID is the RAID configuration that was applied.
	RAID *RAIDConfig `json:"raid,omitempty"`

	// Firmware was the applied FirmwareConfig.
	//
	// Deprecated: always empty.
	Firmware *FirmwareConfig `json:"firmware,omitempty"`

	// CustomDeploy is the custom deploy applied to the host.
	CustomDeploy *CustomDeploy `json:"customDeploy,omitempty"`
}

// CredentialsStatus identifies one version of a BMC credentials Secret.
type CredentialsStatus struct {
	// Reference names the Secret.
	Reference *corev1.SecretReference `json:"credentials,omitempty"`
	// Version is the Secret's resourceVersion.
	Version string `json:"credentialsVersion,omitempty"`
}

// OperationMetric is when an operation started and ended.
type OperationMetric struct {
	// +nullable
	Start metav1.Time `json:"start,omitempty"`
	// +nullable
	End metav1.Time `json:"end,omitempty"`
}

// OperationHistory holds the last run of each long operation.
type OperationHistory struct {
	Register    OperationMetric `json:"register,omitempty"`
	Inspect     OperationMetric `json:"inspect,omitempty"`
	Provision   OperationMetric `json:"provision,omitempty"`
	Deprovision OperationMetric `json:"deprovision,omitempty"`
}
