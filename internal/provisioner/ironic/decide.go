package ironic

import (
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Every operation first decides, from the node it read and nothing else, what to do next; the
// decide* functions below are that decision, pure and table-tested. The operation then carries
// it out (a patch and a state change at most).

// action is the next thing an operation does.
type action int

const (
	actDone       action = iota // finished
	actWaitShort                // Ironic works on something quick: look again soon
	actWaitLong                 // Ironic works on something long: look again later
	actFail                     // the operation failed; decision.msg says why
	actUnexpected               // the node is in a state the operation cannot work from
	actManage                   // → manageable (from enroll, available, clean/adopt failed)
	actProvide                  // manageable → available (automated cleaning)
	actInspect                  // → inspecting
	actClean                    // manageable → manual cleaning
	actDeploy                   // available / deploy failed → deploying
	actUndeploy                 // active / deploy failed / error → deleting
	actAdopt                    // manageable / adopt failed → adopting
	actService                  // active / service failed → servicing
	actAbort                    // stop what the node waits for
	actPowerOn
	actPowerOff     // hard
	actSoftPowerOff // soft, falling back to hard
	actReboot       // hard
	actSoftReboot   // soft, falling back to hard
)

var actionNames = map[action]string{
	actDone: "done", actWaitShort: "wait-short", actWaitLong: "wait-long", actFail: "fail", actUnexpected: "unexpected",
	actManage: "manage", actProvide: "provide", actInspect: "inspect", actClean: "clean", actDeploy: "deploy",
	actUndeploy: "undeploy", actAdopt: "adopt", actService: "service", actAbort: "abort",
	actPowerOn: "power-on", actPowerOff: "power-off", actSoftPowerOff: "soft-power-off",
	actReboot: "reboot", actSoftReboot: "soft-reboot",
}

func (a action) String() string { return actionNames[a] }

// decision is an action with, for actFail, the status message.
type decision struct {
	act action
	msg string
}

func do(a action) decision { return decision{act: a} }
func fail(what string, n *nodes.Node) decision {
	return decision{act: actFail, msg: failureMessage(what, n.LastError)}
}

// failureMessage is the status message for a failed Ironic operation. Known secrets are removed
// by the caller (result), which knows the host.
func failureMessage(what, lastError string) string {
	if lastError == "" {
		return what
	}
	return what + ": " + lastError
}

// result turns the simple decisions about node n into a provisioner.Result; ok is false for the
// actions the operation must carry out itself. A wait on a node Ironic stopped working on says so.
func (p *Provisioner) result(d decision, n *nodes.Node, host provisioner.Host) (provisioner.Result, bool) {
	switch d.act {
	case actDone:
		return provisioner.Done(), true
	case actWaitShort:
		return withStall(p.short(), n, p.now()), true
	case actWaitLong:
		return withStall(p.long(), n, p.now()), true
	case actFail:
		return provisioner.Failed(sanitize(d.msg, host.BMCCredentials.Password)), true
	}
	return provisioner.Result{}, false
}

func state(n *nodes.Node) nodes.ProvisionState { return nodes.ProvisionState(n.ProvisionState) }

// tearingDown reports whether a conductor still holds a node that is already in a failed state:
// an abort moves the node to clean/deploy/service failed first and sets last_error only when its
// tear-down (power off, ejecting media) ends, and a timeout's failure handler records the reason
// only after the state change, so until then the failure cannot be told from an abort nor said
// why, and a manage or retry would be refused (409) anyway.
func tearingDown(n *nodes.Node) bool { return n.Reservation != "" }

// decideRegistration: after enrollment and updates, move enroll → manageable (Ironic verifies the
// BMC). A failed verification is reported unless there is something new to try (credentials just
// written, or a retry asked for).
func decideRegistration(n *nodes.Node, newCredentials, restartOnFailure bool) decision {
	switch state(n) {
	case nodes.Enroll:
		if n.LastError != "" && !newCredentials && !restartOnFailure {
			return decision{act: actFail, msg: bmcProblem(n.LastError)}
		}
		if n.TargetProvisionState == string(nodes.Manageable) || n.TargetProvisionState == string(nodes.TargetManage) {
			return do(actWaitShort) // manage already asked for
		}
		return do(actManage)
	case nodes.Verifying:
		return do(actWaitShort)
	}
	return do(actDone)
}

// decideInspection: inspection runs from manageable; a node inspected before answers with its
// inventory unless refresh. ifaceChange says the inspection needs another inspect_interface,
// which Ironic refuses to change in inspect failed (InvalidState, a 409 that would be retried for
// ever): that retry goes through manageable.
func decideInspection(n *nodes.Node, opts provisioner.InspectOptions, ifaceChange bool) decision {
	if opts.Skip {
		return decideSkippedInspection(n)
	}
	inspected := n.InspectionFinishedAt != nil
	switch state(n) {
	case nodes.Available:
		return do(actManage)
	case nodes.InspectWait:
		if opts.ForceReboot {
			return do(actAbort) // → inspect failed, by request: started again below
		}
		return do(actWaitLong)
	case nodes.Inspecting:
		return do(actWaitLong)
	case nodes.Verifying:
		// Still finishing the manage: under load, Inspect has read a node as verifying right after
		// registration saw it end (3 of 500 hosts in a bench-ironic run). Wait; it is no error.
		return do(actWaitShort)
	case nodes.InspectFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !opts.RestartOnFailure && !opts.Refresh && !abortedByRequest(n) {
			return fail("Inspection failed", n)
		}
		if ifaceChange {
			return do(actManage)
		}
		return do(actInspect)
	case nodes.Manageable:
		if opts.Refresh || !inspected {
			return do(actInspect)
		}
		return do(actDone)
	}
	if opts.Refresh || !inspected {
		return do(actUnexpected)
	}
	return do(actDone)
}

// decideSkippedInspection: inspection disabled while the host inspects. An inspection waiting
// for its agent is aborted (inspect wait → inspect failed), a failed one left for manageable (where
// preparing starts); one Ironic runs itself (inspecting) cannot be aborted and is waited for.
// Anywhere else there is nothing to stop: done.
func decideSkippedInspection(n *nodes.Node) decision {
	switch state(n) {
	case nodes.InspectWait:
		return do(actAbort)
	case nodes.Inspecting, nodes.Verifying:
		return do(actWaitShort)
	case nodes.InspectFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		return do(actManage)
	}
	return do(actDone)
}

// decidePreparation: manual cleaning from manageable, unless there are no steps or the same steps
// already ran (finished).
func decidePreparation(n *nodes.Node, hasSteps, finished, restartOnFailure bool) decision {
	switch state(n) {
	case nodes.Manageable:
		if !hasSteps || finished {
			return do(actDone)
		}
		return do(actClean)
	case nodes.Available:
		if !hasSteps || finished {
			return do(actDone)
		}
		return do(actManage)
	case nodes.Cleaning, nodes.CleanWait, nodes.CleanHold:
		return do(actWaitLong)
	case nodes.CleanFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !restartOnFailure && !ranRecordCheck(n, extraPrepared) && !abortedByRequest(n) {
			return fail("Preparation (manual cleaning) failed", n)
		}
		return do(actManage)
	}
	return do(actUnexpected)
}

// decideProvisioning: manageable → provide → available → deploy → active. matches says the node is
// set up for the requested image, which tells an old failure (report it) or an old deployment
// (abort it, with API 1.110) from the current request. ifaceChange says the request needs another
// deploy_interface (a live ISO or a custom deploy after a direct one, or back), which Ironic
// refuses to change in deploy failed (InvalidState, a 409 that would be retried for ever): the
// node is undeployed first and deployed from available. forceReboot (the user's forced reboot)
// stops a deployment waiting for its agent, so that it starts again with a fresh boot.
func decideProvisioning(n *nodes.Node, matches, ifaceChange, restartOnFailure, forceReboot bool, f Features) decision {
	switch state(n) {
	case nodes.Manageable:
		return do(actProvide)
	case nodes.Cleaning, nodes.CleanWait, nodes.Deleting:
		return do(actWaitLong)
	case nodes.CleanFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !restartOnFailure && !ranRecordCheck(n, extraPrepared) && !abortedByRequest(n) {
			return fail("Cleaning before provisioning failed", n)
		}
		return do(actManage)
	case nodes.Available:
		return do(actDeploy)
	case nodes.DeployWait:
		if (!matches || forceReboot) && f.DeployWaitAbort {
			return do(actAbort) // → deploy failed, by request: deployed again below
		}
		if forceReboot {
			// Before 1.110 a deployment waiting for its agent cannot be aborted: undeployed
			// (cleaning as set when the node was provided), then deployed again (metal3 does so).
			return do(actUndeploy)
		}
		return do(actWaitLong)
	case nodes.Deploying, nodes.DeployHold:
		return do(actWaitLong)
	case nodes.DeployFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if matches && !restartOnFailure && !abortedByRequest(n) {
			return fail("Image provisioning failed", n)
		}
		if ifaceChange {
			return do(actUndeploy)
		}
		if abortedByRequest(n) && !n.DisablePowerOff {
			// Ironic's abort of a deploy wait leaves the server on, and with fast track it keeps
			// the agent's token: the next deployment would wait for that agent again, which is
			// the one that could not answer (lost, forced reboot). Off first, it boots afresh.
			switch {
			case n.TargetPowerState != "":
				return do(actWaitShort)
			case n.PowerState == powerOn:
				return do(actPowerOff)
			}
		}
		return do(actDeploy)
	case nodes.Active:
		return do(actDone)
	case nodes.Error:
		// An undeploy this provisioner asked for (a forced reboot before 1.110, another deploy
		// interface) failed its tear-down, or Ironic restarted in it: reported, so that the host
		// counts the failure and goes through deprovisioning, which undeploys from error.
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !restartOnFailure {
			return fail("Undeploying before the new deployment failed", n)
		}
		return do(actUndeploy)
	}
	return do(actUnexpected)
}

// decideDeprovisioning: active → deleting → (cleaning) → available; a failed clean is retried from
// manageable; a manual cleaning in the way is aborted.
func decideDeprovisioning(n *nodes.Node, restartOnFailure bool) decision {
	switch state(n) {
	case nodes.Active, nodes.DeployFail, nodes.DeployWait:
		return do(actUndeploy)
	case nodes.DeployHold:
		return do(actAbort) // Ironic deletes from deploy hold only by way of deploy failed
	case nodes.Deleting, nodes.Cleaning, nodes.Deploying, nodes.Servicing:
		return do(actWaitLong)
	case nodes.ServiceWait, nodes.ServiceHold:
		return do(actAbort) // → service failed, which undeploys
	case nodes.ServiceFail:
		return do(actUndeploy)
	case nodes.CleanWait:
		if n.TargetProvisionState == string(nodes.Manageable) {
			return do(actAbort)
		}
		return do(actWaitLong)
	case nodes.Error:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !restartOnFailure {
			return fail("Deprovisioning failed", n)
		}
		return do(actUndeploy)
	case nodes.CleanFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !restartOnFailure && !ranRecordCheck(n, extraPrepared) && !containsFold(n.LastError, "abort") {
			return fail("Cleaning failed", n)
		}
		return do(actManage)
	case nodes.Manageable:
		return do(actProvide)
	case nodes.Available:
		return do(actDone)
	case nodes.Adopting:
		// Ironic lost its database and the host was registered again: the image can be taken
		// away once the node is adopted (active). Until the fault campaign found it
		// (docs/fault-campaign.md) this was an error, retried at controller-runtime's error pace.
		return do(actWaitShort)
	case nodes.AdoptFail:
		// An adoption that failed leaves nothing deployed to undeploy: manage, then provide
		// cleans (or not) on the way to available.
		return do(actManage)
	}
	return do(actUnexpected)
}

// decideAdoption: an active node is done (the steady state); a manageable one (re-registered after
// Ironic lost its database) is adopted, unless it is being deprovisioned with no image to adopt.
func decideAdoption(n *nodes.Node, hostState metal3.ProvisioningState, hasImage, restartOnFailure bool) decision {
	switch state(n) {
	case nodes.Active:
		return do(actDone)
	case nodes.Manageable:
		if hostState == metal3.StateDeprovisioning && !hasImage &&
			isEmpty(n.InstanceInfo["image_source"]) && isEmpty(n.InstanceInfo["boot_iso"]) {
			return do(actDone)
		}
		return do(actAdopt)
	case nodes.Available:
		return do(actManage)
	case nodes.Adopting, nodes.Verifying:
		return do(actWaitShort)
	case nodes.AdoptFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !restartOnFailure {
			return fail("Host adoption failed", n)
		}
		return do(actAdopt)
	case nodes.Enroll:
		return do(actUnexpected)
	}
	// Busy with something else (cleaning, servicing, deleting...): nothing to adopt.
	return do(actDone)
}

// decideServicing: servicing from active (f: serviceFacts). Active after the run of the caller's
// attempt is done, whatever is asked now (the request changed while it ran, or was recorded applied
// meanwhile: running it again would flash twice), unless that run failed or was aborted; a request
// whose reported failure an admin aborted since (active again) is still failed until retried. No
// steps while servicing waits or failed means the user took the changes back: abort (service wait
// → service failed → active). A failure is reported until the request changes or the host retries
// it; a servicing that failed only because it was aborted or because Ironic restarted in its middle
// is started again at once, without a report (nothing was wrong with the request). So is one that
// failed on what an earlier attempt left (failedOnStaleStep) when staleRestart says this
// provisioner has not started it again for that yet (once: failing so again is reported). One
// aborted only after its last step ended is finished: aborted on to active, and done there.
func decideServicing(n *nodes.Node, f serviceFacts) decision {
	switch state(n) {
	case nodes.Active:
		switch {
		case f.current && tearingDown(n):
			return do(actWaitShort) // an abort's tear-down writes its last_error at its end
		case f.current && f.failed == "" && !f.aborted:
			return do(actDone)
		case !f.hasSteps:
			return do(actDone)
		case f.requested && f.failed != "" && !f.retry:
			return decision{act: actFail, msg: f.failed}
		}
		return do(actService)
	case nodes.Servicing:
		return do(actWaitLong)
	case nodes.ServiceWait, nodes.ServiceHold:
		if !f.hasSteps {
			return do(actAbort)
		}
		return do(actWaitLong)
	case nodes.ServiceFail:
		if tearingDown(n) {
			return do(actWaitShort)
		}
		if !f.hasSteps {
			return do(actAbort)
		}
		if f.current && f.failed == "" && !f.aborted && abortedByRequest(n) {
			// An abort that let the run's last step end first (neither Redfish step can be
			// interrupted: Ironic fails the node and names the step): the run finished. Take the
			// node back to active, where it is done with what it applied; starting it again from
			// here would flash the firmware twice.
			return do(actAbort)
		}
		if f.requested && f.failed != "" && !f.retry {
			// Reported and recorded for this request already (servicerun.go): the host's retry
			// decides what comes next, not this process's memory, which an operator restart
			// loses (a stale-step failure would be started again at once, and a start refused
			// taken for never asked, each resetting the host's retry count and backoff).
			return decision{act: actFail, msg: f.failed}
		}
		if f.ran && !f.retry && !abortedByRequest(n) && !interruptedByRestart(n) && !f.staleRestart {
			return fail("Servicing failed", n)
		}
		return do(actService)
	}
	return do(actUnexpected)
}

// provisionStateChanging: Ironic is moving the node to target_provision_state. A failed state
// keeps its target (Ironic clears it only in stable states) although nothing moves until someone
// asks: power changes are taken there, and waiting for the target would wait for ever (a host
// deleted after a failed inspection or cleaning was never powered off).
func provisionStateChanging(n *nodes.Node) bool {
	return n.TargetProvisionState != "" && !failedStates[state(n)] // history.go
}

// decideBeforeDeletion: what the node of a deleted host does ends before the host is powered off
// (metal3 #2478). An operation waiting for the agent (an inspection, a manual cleaning, a live
// update, a rescue; a deployment where Ironic can abort it) is aborted: otherwise the power off
// waits until Ironic's callback timeout (30 min) fails it. A running one (inspecting, cleaning, an
// automated cleaning waiting for its agent) is waited for, even with the server still off: Ironic
// powers it on from there, so the host must not be taken for off and its node deleted with the
// server left running the agent.
func decideBeforeDeletion(n *nodes.Node, f Features) decision {
	if !provisionStateChanging(n) {
		if tearingDown(n) {
			return do(actWaitShort) // an abort's tear-down: power changes would be refused (409)
		}
		return do(actDone)
	}
	switch state(n) {
	case nodes.InspectWait, nodes.ServiceWait, nodes.ServiceHold, nodes.RescueWait, nodes.DeployHold:
		return do(actAbort)
	case nodes.CleanWait, nodes.CleanHold:
		if n.TargetProvisionState == string(nodes.Manageable) {
			return do(actAbort)
		}
	case nodes.DeployWait:
		if f.DeployWaitAbort {
			return do(actAbort)
		}
	}
	return do(actWaitShort)
}

// decidePowerOn: last is the power change this provisioner asked for last ("" when none): asked,
// not pending, not on, and Ironic recorded an error means the power on failed.
func decidePowerOn(n *nodes.Node, last string) decision {
	switch {
	case n.PowerState == powerOn:
		return do(actDone)
	case n.TargetPowerState == powerOn:
		return do(actWaitShort)
	case last == powerOn && n.LastError != "":
		// Reported even when forced: the report clears last, so the next call asks again, and
		// a BMC that keeps failing shows its errors (a forced call that never reported one
		// retried for ever with nothing in status).
		return fail("Power on failed", n)
	case provisionStateChanging(n):
		return do(actWaitShort) // Ironic refuses power changes during a provision state change
	}
	return do(actPowerOn)
}

// decidePowerOff: soft by default; hard for the hard mode, force, or after a soft power off that
// did not take.
func decidePowerOff(n *nodes.Node, mode metal3.RebootMode, last string, force bool) decision {
	switch {
	case n.PowerState == powerOff:
		return do(actDone)
	case n.TargetPowerState == powerOff || n.TargetPowerState == softPowerOff:
		return do(actWaitShort)
	case n.DisablePowerOff:
		return decision{act: actFail, msg: "power off is disabled for this host (spec.disablePowerOff)"}
	case last == powerOff && n.LastError != "":
		// Reported even when forced (see decidePowerOn): a host deleted with a BMC that cannot
		// power it off reaches the error count at which deletion goes on without it.
		return fail("Power off failed", n)
	case provisionStateChanging(n):
		return do(actWaitShort)
	case last == softPowerOff || mode == metal3.RebootModeHard || force:
		return do(actPowerOff)
	}
	return do(actSoftPowerOff)
}

// decideReboot: last is the power change this provisioner asked for last. A reboot asked is
// followed until Ironic has no power change pending: failed (once) when Ironic recorded an error
// (it clears last_error when it starts a power change), else done. Without one, a reboot starts
// as soon as Ironic takes power changes; soft only from on (a soft reboot of an off host is a
// power on). Ironic reboots a node with disable_power_off without powering it off.
func decideReboot(n *nodes.Node, mode metal3.RebootMode, last string) decision {
	asked := last == rebooting || last == softRebooting
	switch {
	case n.TargetPowerState != "":
		return do(actWaitShort)
	case asked && n.LastError != "":
		return fail("Reboot failed", n)
	case asked:
		return do(actDone)
	case provisionStateChanging(n):
		return do(actWaitShort) // Ironic refuses power changes during a provision state change
	case mode == metal3.RebootModeSoft && n.PowerState == powerOn:
		return do(actSoftReboot)
	}
	return do(actReboot)
}
