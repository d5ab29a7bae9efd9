package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/provisioner"
)

var metav1Zero = metav1.Time{}

// hostScope is what the handlers of one reconcile share: the host being worked on (a copy; the
// driver diffs it against the snapshot it took), the inputs the driver read for them, and the
// effects they ask the driver to write.
type hostScope struct {
	ctx  context.Context
	cfg  *Config
	prov provisioner.Provisioner
	// now is the reconcile's time, truncated to seconds as the API stores it; wall is the same
	// time untruncated (for the retry times, whose backoff tests measure in milliseconds).
	now  metav1.Time
	wall time.Time
	host *metal3.BareMetalHost
	in   inputs
	fx   effects

	// regs remembers what the host's last registration sent (see registrations).
	regs *registrations
	// retries remembers when failed operations may be retried (see retryTimes).
	retries *retryTimes
	// finished: the live updates the provisioner finished, by host.
	finished *finishedServicings
	// preparations: the requests of running preparations, by host.
	preparations *runningPreparations
	// registered: Register succeeded in this reconcile, no need to ask again.
	registered bool
	// needsRegistration: the provisioner said it does not know the host.
	needsRegistration bool
	// confirmingNetworkData: the registration asked is only a new process's confirmation of the
	// network data the provisioner keeps (networkDataUnconfirmed), no known change.
	confirmingNetworkData bool
	// capacityAsked: this reconcile asked the provisioner for capacity (settleDelayed).
	capacityAsked bool
	// servicedNow: a live update ended in this reconcile.
	servicedNow bool
}

// inputs are read by the driver before the handlers run (they need the API server).
type inputs struct {
	// bmcErr is bad BMC input (address, Secret, keys); its message names the field.
	bmcErr       error
	creds        provisioner.Credentials
	credsRef     *corev1.SecretReference
	credsVersion string
	// hostConfig is user/network/meta data; hostConfigErr names the bad field.
	hostConfig    provisioner.HostConfig
	hostConfigErr error
	// imagePullSecret is the registry credentials of an oci:// image (spec.image.ociAuthSecretName).
	imagePullSecret string
	// preprovNetworkData is spec.preprovisioningNetworkDataName's content, and
	// preprovNetworkDataVersion its Secret's resourceVersion ("" when it is missing).
	preprovNetworkData        string
	preprovNetworkDataVersion string
	// imageFormats are the PreprovisioningImage formats the provisioner boots on this host, most
	// preferred first; nil when images are not used (no --build-preprov-image). image is the
	// host's PreprovisioningImage as cached, nil when there is none.
	imageFormats []metal3.ImageFormat
	image        *metal3.PreprovisioningImage
	// imageCreateRefused: the API server refused to create the image of this (deleting) host
	// because its namespace is being deleted (imageRefusals).
	imageCreateRefused bool
	// firmware holds pending HostFirmwareSettings/Components changes (read where the state row
	// says the host may prepare or take live updates).
	firmware firmwareInputs
	// policy is what the HostUpdatePolicy allows (read where the row says liveUpdates).
	policy updatePolicy
	// dataImage is the host's DataImage (read where the row says liveUpdates: provisioned
	// states), nil when there is none; dataImageStale: the cached copy is older than the host's
	// own last write of it.
	dataImage      *metal3.DataImage
	dataImageStale bool
}

// effects are what the handlers decided that needs the API server; the driver writes them.
type effects struct {
	events            events.List
	removeAnnotations map[string]bool
	// hardwareData is written to the HardwareData of the host before the status patch.
	hardwareData *metal3.HardwareDetails
	// finalize: the host is gone from the provisioner; release Secrets and HardwareData and
	// remove the host's finalizer.
	finalize bool
	// deleteDelayed: deletion waits for a detached annotation with deleteAction delay.
	deleteDelayed bool
	// replacedSecrets: Secrets the host stopped using (its BMC credentials moved to another
	// Secret and registration with the new one succeeded); released unless still used.
	replacedSecrets []string
	// image is the write to the host's PreprovisioningImage (planImage, after the handlers).
	image imageWrite
	// imageCreateRefused: the driver could not create the image (namespace being deleted); the
	// host is looked at again at once, to go on without it.
	imageCreateRefused bool
	// waitedForImage: the reconcile ended waiting for the image (metric).
	waitedForImage bool
	transitions    [][2]metal3.ProvisioningState
	finishedOps    []finishedOp
	hostErrors     []metal3.ErrorType
	// appliedUpdates, when recordUpdates is set, is written to HostFirmwareComponents'
	// status.updates before the host's status (preparing or servicing applied them).
	appliedUpdates []metal3.FirmwareUpdate
	recordUpdates  bool
	// servicingSupported is what the provisioner said about servicing in this reconcile (nil:
	// not asked); it sets the LiveUpdates condition.
	servicingSupported *bool
	// serviced is the duration of a live update that finished in this reconcile; servicingFailed
	// counts a new servicing failure.
	serviced        *time.Duration
	servicingFailed bool
	// retryAt: an operation failed; remembered once the status recording it is written.
	retryAt *retryAt
	// dataImage is the write of the DataImage's status (dataimage.go), before the host's.
	dataImage *dataImageWrite
}

type finishedOp struct {
	state    metal3.ProvisioningState
	duration time.Duration
}

func (s *hostScope) state() metal3.ProvisioningState { return s.host.Status.Provisioning.State }

func (s *hostScope) deleting() bool { return !s.host.DeletionTimestamp.IsZero() }

// removeAnnotation asks the driver to remove an annotation; handlers then see it as gone.
func (s *hostScope) removeAnnotation(key string) {
	if _, ok := s.host.Annotations[key]; !ok {
		return
	}
	if s.fx.removeAnnotations == nil {
		s.fx.removeAnnotations = map[string]bool{}
	}
	s.fx.removeAnnotations[key] = true
}

// clearRebootAnnotations removes the one-shot reboot.metal3.io at the moments the host's power is
// the provisioner's (inspection, deployment) or a deployment ended. The held
// reboot.metal3.io/<owner> ones are their owners' to remove: metal3 removed them too until its
// PR #3342 (issue #3271, 2026), which keeps them, and so do we: a remediation's hold removed at a
// deployment let the new deployment power on behind its owner's back.
func (s *hostScope) clearRebootAnnotations() {
	if _, ok := s.host.Annotations[metal3.RebootAnnotationPrefix]; ok {
		s.removeAnnotation(metal3.RebootAnnotationPrefix)
	}
}

// annotation returns an annotation unless a handler already asked to remove it.
func (s *hostScope) annotation(key string) (string, bool) {
	if s.fx.removeAnnotations[key] {
		return "", false
	}
	v, ok := s.host.Annotations[key]
	return v, ok
}

// provHost is the provisioner's view of the host.
func (s *hostScope) provHost() provisioner.Host {
	h := s.host
	arch := h.Spec.Architecture
	if arch == "" && h.Status.HardwareDetails != nil {
		arch = h.Status.HardwareDetails.CPU.Arch
	}
	return provisioner.Host{
		Namespace:                      h.Namespace,
		Name:                           h.Name,
		UID:                            string(h.UID),
		NodeID:                         h.Status.Provisioning.ID,
		State:                          h.Status.Provisioning.State,
		OperationalStatus:              h.Status.OperationalStatus,
		BMCAddress:                     h.Spec.BMC.Address,
		BMCCredentials:                 s.in.creds,
		DisableCertificateVerification: h.Spec.BMC.DisableCertificateVerification,
		BootMACAddress:                 h.Spec.BootMACAddress,
		BootMode:                       h.BootMode(),
		Architecture:                   arch,
		DisablePowerOff:                h.Spec.DisablePowerOff,
		InspectionMode:                 h.Spec.InspectionMode,
		AutomatedCleaningMode:          h.Spec.AutomatedCleaningMode,
		PreprovisioningNetworkData:     s.in.preprovNetworkData,
		PreprovisioningImage:           s.readyImage(),
	}
}

// restartOnFailure: the last error was this step's, so the provisioner must start over rather
// than report the old failure.
func (s *hostScope) restartOnFailure(t metal3.ErrorType) bool { return s.host.Status.ErrorType == t }

// retryUnderWay is told the answer of a call that retried the reported failure of type t
// (restartOnFailure): busy, the retry runs, and that failure is no longer current. Its type and
// message go (errorCount stays: the next failure's backoff is longer), so that the next call
// reports a new failure instead of retrying it at once; the engine fails some time after it
// starts, and every later reconcile restarted the operation, rebooting the server each time,
// with the first failure shown all along.
func (s *hostScope) retryUnderWay(t metal3.ErrorType, retried bool, res provisioner.Result) {
	st := &s.host.Status
	if !retried || !res.Busy || st.ErrorType != t {
		return
	}
	st.ErrorType, st.ErrorMessage = "", ""
	if st.OperationalStatus == metal3.OperationalStatusError {
		st.OperationalStatus = metal3.OperationalStatusOK
	}
}

// clearError forgets the last error after a success.
func (s *hostScope) clearError() {
	st := &s.host.Status
	st.ErrorType, st.ErrorMessage, st.ErrorCount = "", "", 0
	switch st.OperationalStatus {
	case metal3.OperationalStatusDetached, metal3.OperationalStatusServicing, metal3.OperationalStatusDelayed:
		// Not an error: each has its own way out.
	default:
		st.OperationalStatus = metal3.OperationalStatusOK
	}
}

// clearErrorOf clears the error only when it is of type t (another step's error stays).
func (s *hostScope) clearErrorOf(t metal3.ErrorType) {
	if s.host.Status.ErrorType == t {
		s.clearError()
	}
}

// fail records a failed operation (metal3's recordActionFailure): operationalStatus error, the
// type and message, errorCount+1, an event named after the type, and a retry after a jittered
// exponential backoff.
func (s *hostScope) fail(t metal3.ErrorType, msg string) outcome {
	st := &s.host.Status
	st.OperationalStatus, st.ErrorType, st.ErrorMessage = metal3.OperationalStatusError, t, msg
	st.ErrorCount++
	s.fx.hostErrors = append(s.fx.hostErrors, t)
	s.event(eventWarning, errorReason(t), "Failure", msg)
	d := s.cfg.Backoff(s.backoffCount(t))
	s.fx.retryAt = &retryAt{errorType: t, errorCount: st.ErrorCount, generation: s.host.Generation, at: s.wall.Add(d)}
	return waitFor(d, waitingRetry(t))
}

// backoffCount is the count of failures the backoff of a failure of type t grows with: errorCount,
// and for a provisioning error also the earlier failed attempts.
func (s *hostScope) backoffCount(t metal3.ErrorType) int {
	st := &s.host.Status
	if t == metal3.ProvisioningError && !s.deleting() {
		// The cleaning between two deployments of an image ends with errorCount 0: the earlier
		// failed attempts (provisioningFailCount) keep the backoff growing. Not while the host is
		// deleted: its cleaning is given up after maxDeleteErrors failures, which would otherwise
		// take hours after a few failed deployments.
		return st.ErrorCount + st.ProvisioningFailCount
	}
	return st.ErrorCount
}

// waitingRetry is what a host whose operation failed waits for.
func waitingRetry(t metal3.ErrorType) string { return fmt.Sprintf("a retry after %s", t) }

// inputFailure records bad input (missing Secret, malformed address). Unlike fail it is level
// triggered: the same error seen again changes nothing (no write, no event), and the host is
// looked at again after InputRetryDelay; watches on the host and its Secrets bring it back sooner.
// (A live update keeps operationalStatus servicing beside a registration error: keepServicing.)
func (s *hostScope) inputFailure(t metal3.ErrorType, err error) outcome {
	st := &s.host.Status
	msg := err.Error()
	shown := st.OperationalStatus == metal3.OperationalStatusError || st.OperationalStatus == metal3.OperationalStatusServicing
	if st.ErrorType != t || st.ErrorMessage != msg || !shown {
		st.OperationalStatus, st.ErrorType, st.ErrorMessage = metal3.OperationalStatusError, t, msg
		st.ErrorCount++
		s.fx.hostErrors = append(s.fx.hostErrors, t)
		s.event(eventWarning, errorReason(t), "Failure", msg)
	}
	return waitFor(s.cfg.InputRetryDelay, "the input named in errorMessage to be fixed")
}

// follow turns a provisioner result into an outcome: done (ok true), still working, or failed.
func (s *hostScope) follow(res provisioner.Result, t metal3.ErrorType, what string) (outcome, bool) {
	switch {
	case res.Failed():
		return s.fail(t, res.ErrorMessage), false
	case res.Busy:
		return waitOn(res, what), false
	}
	return outcome{}, true
}

// waitOn waits for a busy result: for what the provisioner says, if it says something.
func waitOn(res provisioner.Result, what string) outcome {
	if res.Waiting != "" {
		what = res.Waiting
	}
	return waitFor(res.RequeueAfter, what)
}

// provError handles an error returned (not reported) by the provisioner.
func (s *hostScope) provError(err error, doing string) outcome {
	switch {
	case errors.Is(err, provisioner.ErrUnavailable):
		s.fx.provisionerUnavailable()
		return waitFor(s.cfg.UnavailableDelay, waitingProvisioner)
	case errors.Is(err, provisioner.ErrNeedsRegistration) && !s.registered:
		s.needsRegistration = true
		if s.host.Status.Provisioning.ID != "" {
			// The provisioner lost the host's node (Ironic lost its database) or deleted one its
			// engine had stalled: say why the host registers again.
			s.event(eventNormal, reasonRegistering, "Register", "Registering the host again: "+sanitizeMessage(err.Error()))
		}
		return repeat()
	case errors.Is(err, provisioner.ErrNeedsPreprovisioningImage):
		return s.imageRefused()
	}
	return internalError(fmt.Errorf("%s host %s/%s: %w", doing, s.host.Namespace, s.host.Name, err))
}

// waitingProvisioner is the Progressing message while the provisioner cannot be reached.
const waitingProvisioner = "the provisioner to become available"

func (fx *effects) provisionerUnavailable() { metricProvisionerUnavailable.Inc() }

// checkCapacity holds a host back (operationalStatus delayed) when the provisioner is busy with
// too many hosts.
func (s *hostScope) checkCapacity() (outcome, bool) {
	s.capacityAsked = true
	ok, err := s.prov.HasCapacity(s.ctx, s.provHost())
	if err != nil {
		return s.provError(err, "checking provisioner capacity for"), true
	}
	st := &s.host.Status
	if !ok {
		if st.OperationalStatus != metal3.OperationalStatusDelayed {
			st.OperationalStatus = metal3.OperationalStatusDelayed
			s.event(eventNormal, reasonDelayed, "Delay", "Provisioner capacity reached; waiting")
		}
		return waitFor(s.cfg.DelayedRequeue, "provisioner capacity (too many hosts busy)"), true
	}
	if st.OperationalStatus == metal3.OperationalStatusDelayed {
		st.OperationalStatus = metal3.OperationalStatusOK
	}
	return outcome{}, false
}

// settleDelayed ends operationalStatus delayed when the reconcile did not ask for capacity: the
// host no longer needs it (its image was removed, its pending live update taken back, it is being
// deleted), and delayed would otherwise stay for good. A host still waiting asks every time.
func (s *hostScope) settleDelayed() {
	if st := &s.host.Status; st.OperationalStatus == metal3.OperationalStatusDelayed && !s.capacityAsked {
		st.OperationalStatus = metal3.OperationalStatusOK
	}
}
