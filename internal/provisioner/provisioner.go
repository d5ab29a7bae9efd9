// Package provisioner defines what the host controller needs from a provisioning engine. The Ironic
// implementation drives a real Ironic; the fixture implementation keeps hosts in memory for tests
// and benchmarks. The interface is split by concern so each piece can be read (and faked) alone.
//
// Every method derives what to do from the engine's own observed state, so calling it again after an
// operator restart neither repeats finished work nor loses work in progress.
package provisioner

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Sentinel errors. Methods return them (possibly wrapped) for conditions that are not host errors.
var (
	// ErrUnavailable means the engine cannot be reached or is not ready; the host keeps its state and
	// the controller waits, saying so in status.
	ErrUnavailable = errors.New("provisioner is not available")
	// ErrNeedsRegistration means the engine no longer knows the host (for example Ironic lost its
	// database); the controller registers it again (and adopts it when it was provisioned).
	ErrNeedsRegistration = errors.New("host is not registered with the provisioner")
	// ErrNeedsPreprovisioningImage means the operation needs the host's PreprovisioningImage and it
	// is not ready yet.
	ErrNeedsPreprovisioningImage = errors.New("waiting for the preprovisioning image")
	// ErrServicingUnsupported means the engine cannot apply live updates to provisioned hosts (an
	// Ironic API older than servicing); the host stays provisioned and its changes wait.
	ErrServicingUnsupported = errors.New("the provisioner cannot service provisioned hosts")
	// ErrDataImageUnsupported means the engine cannot attach a DataImage to this host at all (an
	// Ironic API older than reading virtual media, a driver without virtual media): nothing waits
	// for it.
	ErrDataImageUnsupported = errors.New("the provisioner cannot attach data images to this host")
	// ErrFirmwareUpdateUnsupported means the host's BMC type has no firmware interface (an IPMI
	// address): its firmware components can be neither read nor updated (metal3's name).
	ErrFirmwareUpdateUnsupported = errors.New("the host's BMC type has no firmware interface; firmware updates need a Redfish BMC address")
	// ErrEventSubscriptionUnsupported means the host's BMC cannot take event subscriptions
	// through the engine (an IPMI address): nothing waits for it.
	ErrEventSubscriptionUnsupported = errors.New("the provisioner cannot subscribe to this host's BMC events")
	// ErrBMCRefused means the host's BMC answered a request with a refusal (a Redfish error: a
	// service it lacks, an account that may not do this), as opposed to not answering
	// (ErrUnavailable) or the engine refusing.
	ErrBMCRefused = errors.New("the BMC refused")
	// ErrBusy means the engine holds the host for another request (Ironic's node lock) and this
	// one was not carried out: a wait of a few seconds, not a failure. Errors that wrap it wrap
	// ErrUnavailable too, for callers that do not tell a short wait apart.
	ErrBusy = errors.New("the provisioner is busy with the host")
)

// Result says how an operation stands: done, still working (ask again after RequeueAfter), or failed
// with a message that is safe to show in status (stable, no credentials, no request IDs).
type Result struct {
	Busy         bool
	RequeueAfter time.Duration
	ErrorMessage string
	// Waiting, when set on a busy result, replaces what the caller would say the host waits for:
	// the provisioner knows something the caller cannot (its backend stopped working on the host).
	Waiting string
	// StagedSettings, on a finished abort of a live update (Service with empty data), names the
	// firmware settings the engine had already sent to the BMC without seeing them applied: a BMC
	// applies staged settings at the server's next boot, which the abort does not undo.
	StagedSettings []string
	// Serviced, on a finished Service, is what the run of the caller's servicing attempt applied
	// (nil when none ran to its end: nothing to apply, or an abort).
	Serviced *Serviced
	// Restart, on Service asked AfterFailure: the engine would start the request (it is not the one
	// that failed, or its run was only interrupted); nothing was started.
	Restart bool
	// RegistrationDeferred, on a finished Register, says the engine could not take (all of) the
	// registration change in the node's current state (it waits for its agent) and keeps it to
	// apply later: the host may go on, but must not record the registration as sent (credentials
	// as good, inputs as registered), so that a new operator process sends it again.
	RegistrationDeferred bool
	// Started, on a busy Inspect, says the engine is inspecting the host: this call started the
	// inspection or one was already running. A requested re-inspection (the inspect annotation)
	// is under way then, and not before (the engine may first have to take the host back, which
	// takes more than one call).
	Started bool
	// ForcedReboot, on an Inspect or Provision asked with ForceReboot, says the engine stopped a
	// wait for the agent so that the operation starts again with a fresh boot.
	ForcedReboot bool
	// Transient, on a failed Service, says the BMC failed rather than refused the request (it
	// answered a server error, or not at all): the same request may succeed when tried again, so
	// the host retries it beyond its retry limit.
	Transient bool
}

// Done is a finished operation.
func Done() Result { return Result{} }

// Working is an operation still in progress.
func Working(after time.Duration) Result { return Result{Busy: true, RequeueAfter: after} }

// Failed is an operation that failed; msg goes to status.errorMessage.
func Failed(msg string) Result { return Result{ErrorMessage: msg} }

// Failed reports whether the operation failed.
func (r Result) Failed() bool { return r.ErrorMessage != "" }

// Credentials are the BMC user name and password. String never shows them.
type Credentials struct {
	Username string
	Password string
}

// String redacts the credentials so they cannot reach a log by accident.
func (Credentials) String() string { return "<redacted>" }

// GoString redacts the credentials for %#v as well.
func (c Credentials) GoString() string { return c.String() }

// PreprovisioningImage is a ready image from the host's PreprovisioningImage status.
type PreprovisioningImage struct {
	ImageURL          string
	KernelURL         string
	ExtraKernelParams string
	Format            metal3.ImageFormat
}

// Host is the provisioner's view of one BareMetalHost, built by the controller for each call.
type Host struct {
	Namespace string
	Name      string
	// UID is the BareMetalHost's metadata.uid: the instance UUID metal3 gives the installed OS
	// (config drive meta_data.uuid), which Cluster API's Metal3 provider labels the Node with
	// (metal3.io/uuid) to find the Machine's host.
	UID string
	// NodeID is status.provisioning.ID: the engine's identifier, empty before the first registration.
	NodeID            string
	State             metal3.ProvisioningState
	OperationalStatus metal3.OperationalStatus

	BMCAddress                     string
	BMCCredentials                 Credentials
	DisableCertificateVerification bool
	BootMACAddress                 string
	BootMode                       metal3.BootMode
	Architecture                   string
	DisablePowerOff                bool
	InspectionMode                 metal3.InspectionMode
	AutomatedCleaningMode          metal3.AutomatedCleaningMode

	// PreprovisioningImage is set when an image builder is enabled and the host's image is ready.
	PreprovisioningImage *PreprovisioningImage
	// PreprovisioningNetworkData is the content of spec.preprovisioningNetworkDataName, used when no
	// image builder is enabled.
	PreprovisioningNetworkData string
}

// HostConfig is the cloud-init style data written to the config drive.
type HostConfig struct {
	UserData    string
	NetworkData string
	MetaData    string
}

// ParseConfigData parses network data or meta data: a YAML or JSON object, as metal3 accepts.
// Empty data (or a null document) is no data: nil, nil. The host controller calls it when it
// reads the Secrets, so that bad data is an input error before provisioning starts, and a
// provisioner calls it to build what it sends. The error never quotes the data (it may hold
// secrets); callers put the field in front.
func ParseConfigData(data string) (map[string]any, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var v any
	if err := yaml.Unmarshal([]byte(data), &v); err != nil {
		return nil, errors.New("not valid YAML or JSON" + parserDetail(err))
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v, nil
	case []any:
		return nil, errors.New("a list, not a YAML or JSON object (key: value pairs)")
	case string:
		return nil, errors.New("a string, not a YAML or JSON object (key: value pairs)")
	default:
		return nil, errors.New("a single value, not a YAML or JSON object (key: value pairs)")
	}
}

// parserDetail is where and why the YAML parser stopped ("yaml: line 2: mapping values are not
// allowed in this context"), for the status message. A few of its messages quote the data (a
// tagged value, an anchor, a map key), so those keep only the line. Not wrapped for that reason.
func parserDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "yaml: "); i >= 0 {
		msg = msg[i:] // without sigs.k8s.io/yaml's "error converting YAML to JSON: "
	}
	if strings.ContainsAny(msg, "`'\"{[") {
		msg = yamlLine.FindString(msg)
	}
	if msg == "" {
		return ""
	}
	return ": " + msg
}

var yamlLine = regexp.MustCompile(`^yaml: line \d+`)

// RegisterOptions tune Register.
type RegisterOptions struct {
	// CredentialsChanged: the BMC Secret changed since the last successful registration.
	CredentialsChanged bool
	// RestartOnFailure: the last attempt failed; start over instead of reporting the old failure.
	RestartOnFailure bool
}

// PrepareData is what the preparing state applies through manual cleaning.
type PrepareData struct {
	TargetRAIDConfig *metal3.RAIDConfig
	ActualRAIDConfig *metal3.RAIDConfig
	RootDeviceHints  *metal3.RootDeviceHints
	// FirmwareSettings holds only the settings that differ from the current ones.
	FirmwareSettings metal3.DesiredSettingsMap
	FirmwareUpdates  []metal3.FirmwareUpdate
}

// ProvisionData is what provisioning (and adoption) writes or boots.
type ProvisionData struct {
	Image           *metal3.Image
	CustomDeploy    *metal3.CustomDeploy
	BootMode        metal3.BootMode
	RootDeviceHints *metal3.RootDeviceHints
	HostConfig      HostConfig
	// HostConfigError says why some of the host's user, network or meta data cannot be read now
	// ("" when all can: a Secret deleted or emptied while the host provisions). A deployment that
	// would write the config drive is not started with what could be read: it fails with this
	// message, which names the field.
	HostConfigError string
	// ImagePullSecret is the registry credentials of an oci:// image (spec.image.ociAuthSecretName),
	// "user:password" or a token ("" for none): Ironic's instance_info image_pull_secret.
	ImagePullSecret string
	// ForceReboot: the user asked a forced reboot (reboot.metal3.io with "force": true). A
	// deployment waiting for its agent (the server never booted it, or it hangs) is stopped and
	// started again, which boots the agent afresh; anything else goes on as it is. Adopt ignores it.
	ForceReboot bool
}

// ServiceData is what servicing (live updates) applies to a provisioned host. Empty data while the
// engine is servicing or failed servicing means "abort".
type ServiceData struct {
	// FirmwareSettings holds only the settings that differ from the current ones.
	FirmwareSettings metal3.DesiredSettingsMap
	FirmwareUpdates  []metal3.FirmwareUpdate
	// Since identifies the host's servicing attempt: when it started, as the host's status records
	// it (the operator's clock, whole seconds). The engine keeps it with the run it starts and only
	// ever compares it with itself (never with its own clock): a run kept with the same Since is this
	// attempt's, reported done once finished whatever the data asks by then (changed while it ran,
	// or already recorded applied after a status write that failed), and never started twice. A run
	// kept with another Since is an earlier attempt's: the same data is applied again (the values
	// were changed back behind the operator's back), and its failure is retried. Zero: a caller
	// without attempts (tests, tools): a run of the same data is its own.
	Since time.Time
	// RetryFailed: this request's servicing failed and the failure was reported; start it again.
	// For callers without Since; with Since, a new attempt is the retry.
	RetryFailed bool
	// AfterFailure: the host's live update failed and waits (Since is zero, or the attempt's time
	// while a running live update waits for its agent image). The engine reports the
	// failure, follows or aborts what runs, and starts nothing: a request it would start (changed
	// changes, or a run only interrupted) is answered Result.Restart. The host then writes that
	// its servicing starts again (a new Since) before asking again.
	AfterFailure bool
}

// Serviced is what a finished servicing run applied: the request it was started with.
type Serviced struct {
	Settings []string // names of the firmware settings set
	Updates  []metal3.FirmwareUpdate
}

// Empty reports whether there is nothing to apply.
func (d ServiceData) Empty() bool { return len(d.FirmwareSettings) == 0 && len(d.FirmwareUpdates) == 0 }

// FinishedBy reports whether an engine's servicing of this data that ended at ended (the engine's
// clock) is this servicing's. It compares two clocks, so it only serves runs an engine recorded
// without their Since (an older operator's); see Since.
func (d ServiceData) FinishedBy(ended time.Time) bool {
	return d.Since.IsZero() || !ended.Before(d.Since)
}

// Registrar enrolls hosts and removes them.
type Registrar interface {
	// Register creates or updates the engine's record of the host and checks BMC access. Done
	// carries the engine's identifier for status.provisioning.ID.
	Register(ctx context.Context, host Host, opts RegisterOptions) (Result, string, error)
	// Adopt takes over an already provisioned host without touching its disk.
	Adopt(ctx context.Context, host Host, data ProvisionData, restartOnFailure bool) (Result, error)
	// Detach removes the host from the engine without changing it.
	Detach(ctx context.Context, host Host) (Result, error)
	// Delete removes the host from the engine for good.
	Delete(ctx context.Context, host Host) (Result, error)
	// StopForDeletion ends what the engine does with a deleted host before it is powered off: an
	// operation waiting for the agent is aborted (it would hold the power off until the engine's
	// timeout), a running one is waited for (Busy).
	StopForDeletion(ctx context.Context, host Host) (Result, error)
}

// InspectOptions tune Inspect.
type InspectOptions struct {
	// Refresh asks for a new inspection even when the engine already has inspection data
	// (the inspect.metal3.io annotation).
	Refresh bool
	// RestartOnFailure: the last attempt failed; start over instead of reporting the old failure.
	RestartOnFailure bool
	// Skip: inspection was disabled while the host was inspecting. An inspection under way is
	// stopped and the node readied for preparing; done, with no details.
	Skip bool
	// ForceReboot: the user asked a forced reboot (reboot.metal3.io with "force": true). An
	// inspection waiting for its agent is stopped and started again, which boots the agent afresh
	// (with the host's current preprovisioning image); anything else goes on as it is.
	ForceReboot bool
}

// Inspector collects hardware details.
type Inspector interface {
	// Inspect starts or follows inspection; when done it returns the hardware details. Without
	// Refresh, a host the engine has already inspected returns its stored details at once.
	Inspect(ctx context.Context, host Host, opts InspectOptions) (Result, *metal3.HardwareDetails, error)
}

// Preparer applies RAID, root device hints, firmware settings and updates before provisioning.
type Preparer interface {
	Prepare(ctx context.Context, host Host, data PrepareData, restartOnFailure bool) (Result, error)
}

// Deployer writes (or boots) an image and takes it away again.
type Deployer interface {
	Provision(ctx context.Context, host Host, data ProvisionData, restartOnFailure bool) (Result, error)
	Deprovision(ctx context.Context, host Host, restartOnFailure bool) (Result, error)
}

// Servicer applies live updates to provisioned hosts.
type Servicer interface {
	// ServicingSupported reports whether the engine can service provisioned hosts at all (an
	// Ironic API older than servicing cannot); asked before a live update starts.
	ServicingSupported(ctx context.Context) (bool, error)
	// Service starts or follows servicing with data and is done when the host is back in service
	// with the run of the caller's attempt (ServiceData.Since) finished, reporting what that run
	// applied (Result.Serviced); asked again for that attempt it is done at once, whatever data
	// asks by then. A failed servicing is reported again for the same data and started again for
	// different data (the user changed the request) or a new attempt; with AfterFailure nothing
	// starts (Result.Restart); empty data aborts a servicing that waits or failed. An engine that
	// cannot service returns ErrServicingUnsupported.
	Service(ctx context.Context, host Host, data ServiceData) (Result, error)
}

// PowerController reads and changes power.
type PowerController interface {
	PowerOn(ctx context.Context, host Host, force bool) (Result, error)
	// PowerOff turns the host off; soft mode falls back to hard when the BMC cannot do it. A host
	// with DisablePowerOff is never turned off: the engine refuses (Failed).
	PowerOff(ctx context.Context, host Host, mode metal3.RebootMode, force bool) (Result, error)
	// Reboot restarts the host without leaving it off (a host with DisablePowerOff reboots this
	// way); soft mode falls back to hard when the BMC cannot do it. The first call asks for the
	// reboot; the calls after it follow it: Busy while it runs (or while the engine cannot take it
	// yet), Done once the host is back on, Failed (once) when the engine could not reboot it. A
	// call after Done asks for another reboot.
	Reboot(ctx context.Context, host Host, mode metal3.RebootMode) (Result, error)
	// PowerState reports whether the host is on; known is false while the engine does not know.
	PowerState(ctx context.Context, host Host) (poweredOn bool, known bool, err error)
}

// FirmwareReader reads firmware settings, their schema and firmware components.
type FirmwareReader interface {
	FirmwareSettings(ctx context.Context, host Host, includeSchema bool) (metal3.SettingsMap, map[string]metal3.SettingSchema, error)
	FirmwareComponents(ctx context.Context, host Host) ([]metal3.FirmwareComponentStatus, error)
}

// DataImageState is the virtual media the engine shows on a host for its DataImage.
type DataImageState struct {
	// Attached: an image is inserted in the host's virtual CD.
	Attached bool
	// Busy: the engine is working on the host (an attach or detach, or another operation) and
	// cannot say yet; ask again later.
	Busy bool
	// Error is why the last attach or detach failed, when it did and nothing was asked since (safe
	// for status: no credentials, no request IDs).
	Error string
}

// DataImager attaches a DataImage (a non-bootable ISO the host's operating system reads) as the
// host's virtual CD, and detaches it. metal3 does both only while a provisioned host is off, just
// before it is powered on, so that the operating system sees the change at boot.
type DataImager interface {
	// DataImage reads what the host's virtual CD holds.
	DataImage(ctx context.Context, host Host) (DataImageState, error)
	// AttachDataImage asks the engine to insert the image at url. The engine may fetch and serve it
	// itself and finish later: DataImage reports the outcome (Attached, or Error).
	AttachDataImage(ctx context.Context, host Host, url string) (Result, error)
	// DetachDataImage asks the engine to eject the host's virtual CD; it may finish later.
	DetachDataImage(ctx context.Context, host Host) (Result, error)
}

// EventSubscription is a Redfish event subscription to create on a host's BMC
// (BMCEventSubscription).
type EventSubscription struct {
	// Destination is the URL the BMC posts events to; Context is sent back with each event.
	Destination string
	Context     string
	// HTTPHeaders are sent by the BMC with each event. They often carry a token: never log them.
	HTTPHeaders map[string]string
}

// String leaves the headers' values out, so that they cannot reach a log by accident.
func (s EventSubscription) String() string {
	names := slices.Sorted(maps.Keys(s.HTTPHeaders))
	return "destination " + s.Destination + ", context " + s.Context + ", headers " + strings.Join(names, ",")
}

// GoString redacts the headers for %#v as well.
func (s EventSubscription) GoString() string { return s.String() }

// EventSubscriber manages Redfish event subscriptions on hosts' BMCs. An error that wraps
// ErrUnavailable or ErrNeedsRegistration is waited for (ErrBusy, the host locked by another
// request, only a few seconds); any other is the BMC's or the engine's answer, safe for status (no
// credentials, no header values).
type EventSubscriber interface {
	// CreateEventSubscription creates the subscription and returns the BMC's identifier of it.
	CreateEventSubscription(ctx context.Context, host Host, sub EventSubscription) (string, error)
	// EventSubscriptionExists reports whether the BMC still has subscription id with sub's
	// destination and context (its headers cannot be read back): a BMC reset to its defaults, or
	// replaced, has lost it, and may have given its id to another client's subscription.
	EventSubscriptionExists(ctx context.Context, host Host, id string, sub EventSubscription) (bool, error)
	// DeleteEventSubscription removes the subscription; one the BMC no longer has is not an error.
	DeleteEventSubscription(ctx context.Context, host Host, id string) error
	// FindEventSubscriptions returns the identifiers of the BMC's subscriptions with sub's
	// destination and context (a create whose answer was lost, say), in the BMC's order.
	FindEventSubscriptions(ctx context.Context, host Host, sub EventSubscription) ([]string, error)
}

// Capacity limits how many hosts the engine works on at once.
type Capacity interface {
	// HasCapacity reports whether host may start a busy operation (PROVISIONING_LIMIT): always
	// for a host that boots by virtual media (metal3: it needs no DHCP lease nor TFTP, the
	// limit's reason), else when fewer than the limit are busy.
	HasCapacity(ctx context.Context, host Host) (bool, error)
}

// ImageFormats says which PreprovisioningImage formats the engine can boot on a host (which
// depends on its BMC: virtual media boots an ISO), in order of preference; nil when no image
// builder is in use. The host controller puts the list in the image's spec.acceptFormats.
type ImageFormats interface {
	PreprovisioningImageFormats(host Host) ([]metal3.ImageFormat, error)
}

// Watcher is implemented by provisioners that follow the engine on their own (the Ironic
// provisioner lists every node in rounds instead of reading one node per host poll): the
// controller runs Watch on the leader and reconciles the hosts sent on Changes at once, instead of
// at their next poll.
type Watcher interface {
	// Watch follows the engine until ctx ends.
	Watch(ctx context.Context) error
	// Changes delivers the hosts whose state in the engine changed.
	Changes() <-chan types.NamespacedName
}

// Provisioner is everything the host controller uses.
type Provisioner interface {
	Registrar
	Inspector
	Preparer
	Deployer
	Servicer
	PowerController
	FirmwareReader
	DataImager
	EventSubscriber
	Capacity
	ImageFormats
}
