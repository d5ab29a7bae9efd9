package ironic

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// extraServiceRun holds, in the node's extra next to the request's fingerprint (extraServiced),
// the record of the last servicing this provisioner started, written in the same PATCH before the
// start. Ironic keeps no trace of what a servicing ran nor of how it ended (an abort, whether an
// admin's or ours for a lost agent, ends active like a success, and its last_error is erased by
// the power sync), and the host's memory does not survive a restart, so whether the host's
// current attempt finished, failed or never started is read here:
//   - since is the attempt's ServiceData.Since as the host wrote it (the operator's clock, only
//     ever compared with itself): a run of the same since is that attempt's;
//   - stateSince is the node's provision_updated_at when the record was written (Ironic's clock,
//     only compared with itself): a node that has not changed state since never started the run
//     (Ironic refused or the operator restarted between the PATCH and the start);
//   - settings and updates are what the run applies, reported when it finishes, so that the host
//     records the updates that ran and not its request of the moment (edited meanwhile);
//   - failed is the failure reported for it: the node active again after it (an admin's abort of
//     the failed servicing) is no success;
//   - abortedAfter is the step an abort let end first, as Ironic named it in service failed
//     (abortedStep), kept before the abort that takes the node from there to active, whose
//     last_error no longer names it.
const extraServiceRun = "metalforge_service_run"

type serviceRun struct {
	Since      string                  `json:"since,omitempty"`
	StateSince string                  `json:"state_since,omitempty"`
	Settings   []string                `json:"settings,omitempty"`
	Updates    []metal3.FirmwareUpdate `json:"updates,omitempty"`
	Failed     string                  `json:"failed,omitempty"`
	// BMCFault: Failed is a failure of the BMC (bmcFault, judged on Ironic's whole message
	// before Failed's copy was cut to the status's length).
	BMCFault bool `json:"bmc_fault,omitempty"`
	// AbortedAfter: see extraServiceRun.
	AbortedAfter string `json:"aborted_after,omitempty"`
}

// attemptToken is how a record keeps ServiceData.Since: whole seconds, UTC ("" for zero).
func attemptToken(since time.Time) string {
	if since.IsZero() {
		return ""
	}
	return since.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// ironicStamp is how a record keeps one of the node's times (Ironic's clock).
func ironicStamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// newServiceRun is the record of a run of data started now on n.
func newServiceRun(n *nodes.Node, data provisioner.ServiceData, settings []string) serviceRun {
	return serviceRun{Since: attemptToken(data.Since), StateSince: ironicStamp(n.ProvisionUpdatedAt),
		Settings: settings, Updates: data.FirmwareUpdates}
}

// readServiceRun reads n's record; ok is false when there is none (or it cannot be read: an older
// operator's node, or one edited by hand).
func readServiceRun(n *nodes.Node) (serviceRun, bool) {
	v, exists := n.Extra[extraServiceRun]
	if !exists || v == nil {
		return serviceRun{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return serviceRun{}, false
	}
	var r serviceRun
	if json.Unmarshal(b, &r) != nil {
		return serviceRun{}, false
	}
	return r, true
}

// value is the record as it goes into extra (plain JSON data, so that comparing it with what
// Ironic returns works).
func (r serviceRun) value() any {
	b, _ := json.Marshal(r)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// started reports whether n changed provision state after the record was written: the run began.
func (r serviceRun) started(n *nodes.Node) bool {
	return r.StateSince != "" && r.StateSince != ironicStamp(n.ProvisionUpdatedAt)
}

// serviced is what the run applies, as the host is told once it finished.
func (r serviceRun) serviced() *provisioner.Serviced {
	return &provisioner.Serviced{Settings: r.Settings, Updates: r.Updates}
}

// Service steps whose end an abort may wait for: what each applies (completedBeforeAbort).
const (
	stepFirmwareUpdate = "firmware.update"
	stepBIOSApply      = "bios.apply_configuration"
)

// abortedStep is the step an abort let end first, as Ironic names it in last_error ("By request,
// the service operation was aborted during or after the completion of step \"firmware.update\"",
// conductor/servicing.py get_last_error), "" when it names none of the run's steps. None of them
// can be interrupted (Ironic's redfish BIOS and firmware steps are not abortable): an abort in
// service wait only marks the running step (abort_after), and once it ends Ironic moves the node
// to service failed with that message and service_step cleared; the abort from there to active
// then names no step (servicing.py do_node_service_abort), so the run's record keeps it
// (serviceRun.AbortedAfter).
func abortedStep(lastError string) string {
	if !containsFold(lastError, "by request") {
		return ""
	}
	for _, step := range []string{stepFirmwareUpdate, stepBIOSApply} {
		if strings.Contains(lastError, `"`+step+`"`) {
			return step
		}
	}
	return ""
}

// completedBeforeAbort is what of the run its steps applied before an abort took effect (nil when
// nothing is known to have): the step last_error names (abortedStep), else the one the record
// kept from service failed. The BIOS step runs first. The power sync may have erased last_error:
// then only the record knows.
func (r serviceRun) completedBeforeAbort(lastError string) *provisioner.Serviced {
	step := abortedStep(lastError)
	if step == "" {
		step = r.AbortedAfter
	}
	switch {
	case step == stepFirmwareUpdate:
		return r.serviced()
	case step == stepBIOSApply && len(r.Settings) > 0:
		return &provisioner.Serviced{Settings: r.Settings}
	}
	return nil
}

// serviceFacts is what decideServicing knows besides the node.
type serviceFacts struct {
	hasSteps bool
	// ran: the request asked now was the last one started on the node (its fingerprint written
	// and Ironic accepted the start).
	ran bool
	// requested: the request asked now was the last one written to the node, started or not (a
	// start Ironic refused is a failure of the request too).
	requested bool
	// current: the node's recorded run is the caller's attempt's (same Since; without Since, the
	// same request), and it started.
	current bool
	// failed is the failure reported for the recorded run ("" when none was).
	failed string
	// aborted: the node's last servicing ended in an abort (its last_error says so, or this
	// provisioner asked for one since it began) before its steps all ended: active after it is no
	// success. partial is what the current run applied before it (completedBeforeAbort).
	aborted bool
	partial *provisioner.Serviced
	// retry: the host retries a reported failure (RetryFailed, or a new attempt).
	retry bool
	// staleRestart: see failedOnStaleStep.
	staleRestart bool
}

// serviceFactsOf gathers the facts for the request fp of data on n (run, hasRun: its record).
func (p *Provisioner) serviceFactsOf(n *nodes.Node, data provisioner.ServiceData, fp string, hasSteps bool) (serviceFacts, serviceRun, bool) {
	run, hasRun := readServiceRun(n)
	written, _ := n.Extra[extraServiced].(string)
	f := serviceFacts{hasSteps: hasSteps, ran: p.finished(n, extraServiced, fp), requested: written == fp}
	token := attemptToken(data.Since)
	switch {
	case ranRecordCheck(n, extraServiced):
		// The last run was the check of a stale BIOS record (staged.go), not a request.
	case hasRun:
		f.current = run.Since == token && (token != "" || f.ran) && run.started(n)
		f.failed = run.Failed
	default:
		// A fingerprint without a record (an older operator's): the request's, finished by
		// Ironic's clock as that operator judged it.
		f.current = f.ran && data.FinishedBy(n.ProvisionUpdatedAt)
	}
	f.aborted = abortedByRequest(n)
	if state(n) == nodes.Active && !f.aborted {
		// Ironic's power sync may have erased the abort's last_error already.
		_, f.aborted = p.memory.abortRequested(n.UUID, n.ProvisionUpdatedAt, p.now().Add(-failureEventWindow))
	}
	if state(n) == nodes.Active && !f.aborted && hasRun && f.current && run.AbortedAfter != "" {
		// The record kept the step an abort let end, in service failed, before the abort on to
		// active: this run was aborted, whatever a restarted operator's memory lost and the power
		// sync erased (reported whole, the updates the abort skipped were recorded as applied).
		f.aborted = true
	}
	if f.current && f.aborted && hasRun {
		if f.partial = run.completedBeforeAbort(n.LastError); f.partial != nil && len(f.partial.Updates) == len(run.Updates) {
			f.aborted = false // aborted after its last step ended: finished
		}
	}
	f.retry = data.RetryFailed || (hasRun && token != "" && run.Since != token)
	f.staleRestart = state(n) == nodes.ServiceFail && failedOnStaleStep(n) && !p.memory.staleServiceRestarted(n.UUID)
	return f, run, hasRun
}
