package ironic

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// node is a node fixture: provision state, then optional key=value settings.
func node(st nodes.ProvisionState, opts ...func(*nodes.Node)) *nodes.Node {
	n := &nodes.Node{UUID: "n1", ProvisionState: string(st), InstanceInfo: map[string]any{}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func lastError(msg string) func(*nodes.Node) { return func(n *nodes.Node) { n.LastError = msg } }
func target(t string) func(*nodes.Node)      { return func(n *nodes.Node) { n.TargetProvisionState = t } }
func power(s, target string) func(*nodes.Node) {
	return func(n *nodes.Node) { n.PowerState, n.TargetPowerState = s, target }
}
func checkRan(n *nodes.Node)  { n.Extra = map[string]any{extraPrepared: recordCheckPrefix + "0123"} }
func reserved(n *nodes.Node)  { n.Reservation = "metalforge-conductor" }
func inspected(n *nodes.Node) { t := time.Unix(1, 0); n.InspectionFinishedAt = &t }

type decideCase struct {
	got     decision
	want    action
	wantMsg string // substring of the failure message
}

func checkDecisions(t *testing.T, cases map[string]decideCase) {
	t.Helper()
	for name, tc := range cases {
		if tc.got.act != tc.want {
			t.Errorf("%s: %s, want %s", name, tc.got.act, tc.want)
			continue
		}
		if tc.want == actFail && !strings.Contains(tc.got.msg, tc.wantMsg) {
			t.Errorf("%s: message %q, want it to contain %q", name, tc.got.msg, tc.wantMsg)
		}
	}
}

func TestDecideRegistration(t *testing.T) {
	bad := "Failed to get power state for node n1. Error: HTTP GET http://bmc/redfish/v1/Systems/1 returned code 401. Base.1.18.NoValidSession: x"
	checkDecisions(t, map[string]decideCase{
		"fresh node":                   {got: decideRegistration(node(nodes.Enroll), true, false), want: actManage},
		"manage under way":             {got: decideRegistration(node(nodes.Enroll, target("manageable")), false, false), want: actWaitShort},
		"verifying":                    {got: decideRegistration(node(nodes.Verifying), false, false), want: actWaitShort},
		"wrong credentials":            {got: decideRegistration(node(nodes.Enroll, lastError(bad)), false, false), want: actFail, wantMsg: "BMC rejected the credentials (HTTP 401)"},
		"new credentials after a fail": {got: decideRegistration(node(nodes.Enroll, lastError(bad)), true, false), want: actManage},
		"retry after a fail":           {got: decideRegistration(node(nodes.Enroll, lastError(bad)), false, true), want: actManage},
		"manageable":                   {got: decideRegistration(node(nodes.Manageable), false, false), want: actDone},
		"active":                       {got: decideRegistration(node(nodes.Active), false, false), want: actDone},
	})
}

func TestDecideInspection(t *testing.T) {
	none := provisioner.InspectOptions{}
	refresh := provisioner.InspectOptions{Refresh: true}
	restart := provisioner.InspectOptions{RestartOnFailure: true}
	skip := provisioner.InspectOptions{Skip: true}
	force := provisioner.InspectOptions{ForceReboot: true}
	checkDecisions(t, map[string]decideCase{
		"never inspected":    {got: decideInspection(node(nodes.Manageable), none, false), want: actInspect},
		"inspected":          {got: decideInspection(node(nodes.Manageable, inspected), none, false), want: actDone},
		"inspected, refresh": {got: decideInspection(node(nodes.Manageable, inspected), refresh, false), want: actInspect},
		"available":          {got: decideInspection(node(nodes.Available), none, false), want: actManage},
		"inspecting":         {got: decideInspection(node(nodes.Inspecting), none, false), want: actWaitLong},
		"inspect wait":       {got: decideInspection(node(nodes.InspectWait), none, false), want: actWaitLong},
		"still verifying":    {got: decideInspection(node(nodes.Verifying), none, false), want: actWaitShort},
		"failed":             {got: decideInspection(node(nodes.InspectFail, lastError("boom")), none, false), want: actFail, wantMsg: "Inspection failed: boom"},
		"failed, restart":    {got: decideInspection(node(nodes.InspectFail), restart, false), want: actInspect},
		// Ironic refuses a change of inspect_interface in inspect failed (InvalidState, 409): the
		// retry with another inspection mode goes through manageable.
		"failed, restart, other interface": {got: decideInspection(node(nodes.InspectFail), restart, true), want: actManage},
		"manageable, other interface":      {got: decideInspection(node(nodes.Manageable), none, true), want: actInspect},
		"failed, still held":               {got: decideInspection(node(nodes.InspectFail, reserved), none, false), want: actWaitShort},
		"active with data":                 {got: decideInspection(node(nodes.Active, inspected), none, false), want: actDone},
		"active without data":              {got: decideInspection(node(nodes.Active), none, false), want: actUnexpected},
		"active, refresh requested":        {got: decideInspection(node(nodes.Active, inspected), refresh, false), want: actUnexpected},
		// Inspection disabled while the host inspected: stopped, the node readied for preparing.
		"skipped: waiting for the agent": {got: decideInspection(node(nodes.InspectWait), skip, false), want: actAbort},
		"skipped: Ironic inspects":       {got: decideInspection(node(nodes.Inspecting), skip, false), want: actWaitShort},
		"skipped: failed":                {got: decideInspection(node(nodes.InspectFail, lastError("boom")), skip, false), want: actManage},
		"skipped: failed, still held":    {got: decideInspection(node(nodes.InspectFail, reserved), skip, false), want: actWaitShort},
		"skipped: manageable":            {got: decideInspection(node(nodes.Manageable), skip, false), want: actDone},
		// A forced reboot (reboot.metal3.io with force) stops an inspection waiting for its agent;
		// the abort's failure starts it again (any other failure is still reported).
		"forced: waiting for the agent": {got: decideInspection(node(nodes.InspectWait), force, false), want: actAbort},
		"forced: Ironic inspects":       {got: decideInspection(node(nodes.Inspecting), force, false), want: actWaitLong},
		"forced: manageable, inspected": {got: decideInspection(node(nodes.Manageable, inspected), force, false), want: actDone},
		"aborted by request":            {got: decideInspection(node(nodes.InspectFail, lastError("Inspection was aborted by request.")), none, false), want: actInspect},
		"aborted, still held":           {got: decideInspection(node(nodes.InspectFail, lastError("Inspection was aborted by request."), reserved), none, false), want: actWaitShort},
		"forced: failed":                {got: decideInspection(node(nodes.InspectFail, lastError("boom")), force, false), want: actFail, wantMsg: "Inspection failed: boom"},
	})
}

func TestDecidePreparation(t *testing.T) {
	checkDecisions(t, map[string]decideCase{
		"steps to run":            {got: decidePreparation(node(nodes.Manageable), true, false, false), want: actClean},
		"no steps":                {got: decidePreparation(node(nodes.Manageable), false, false, false), want: actDone},
		"same steps ran":          {got: decidePreparation(node(nodes.Manageable), true, true, false), want: actDone},
		"available with steps":    {got: decidePreparation(node(nodes.Available), true, false, false), want: actManage},
		"available, no steps":     {got: decidePreparation(node(nodes.Available), false, false, false), want: actDone},
		"cleaning":                {got: decidePreparation(node(nodes.Cleaning), true, true, false), want: actWaitLong},
		"clean wait":              {got: decidePreparation(node(nodes.CleanWait), true, true, false), want: actWaitLong},
		"failed":                  {got: decidePreparation(node(nodes.CleanFail, lastError("raid")), true, true, false), want: actFail, wantMsg: "manual cleaning) failed: raid"},
		"failed, restart":         {got: decidePreparation(node(nodes.CleanFail), true, true, true), want: actManage},
		"aborted (lost agent)":    {got: decidePreparation(node(nodes.CleanFail, lastError(cleanAborted)), true, false, false), want: actManage},
		"the record check failed": {got: decidePreparation(node(nodes.CleanFail, lastError("not updated"), checkRan), true, false, false), want: actManage},
		"abort tearing down":      {got: decidePreparation(node(nodes.CleanFail, reserved), true, false, false), want: actWaitShort},
		"active":                  {got: decidePreparation(node(nodes.Active), true, false, false), want: actUnexpected},
	})
}

// cleanAborted is Ironic's last_error after an abort in clean wait.
const cleanAborted = "By request, the clean operation was aborted"

func TestDecideProvisioning(t *testing.T) {
	with := Features{DeployWaitAbort: true}
	without := Features{}
	checkDecisions(t, map[string]decideCase{
		"manageable":                    {got: decideProvisioning(node(nodes.Manageable), true, false, false, false, with), want: actProvide},
		"cleaning":                      {got: decideProvisioning(node(nodes.Cleaning), true, false, false, false, with), want: actWaitLong},
		"clean failed":                  {got: decideProvisioning(node(nodes.CleanFail, lastError("x")), true, false, false, false, with), want: actFail, wantMsg: "Cleaning before provisioning failed: x"},
		"clean failed, restart":         {got: decideProvisioning(node(nodes.CleanFail), true, false, true, false, with), want: actManage},
		"clean aborted (lost agent)":    {got: decideProvisioning(node(nodes.CleanFail, lastError(cleanAborted)), true, false, false, false, with), want: actManage},
		"the record check failed":       {got: decideProvisioning(node(nodes.CleanFail, lastError("not updated"), checkRan), true, false, false, false, with), want: actManage},
		"clean abort tearing down":      {got: decideProvisioning(node(nodes.CleanFail, reserved), true, false, false, false, with), want: actWaitShort},
		"deploy abort tearing down":     {got: decideProvisioning(node(nodes.DeployFail, reserved), true, false, false, false, with), want: actWaitShort},
		"available":                     {got: decideProvisioning(node(nodes.Available), false, false, false, false, with), want: actDeploy},
		"deploying":                     {got: decideProvisioning(node(nodes.Deploying), true, false, false, false, with), want: actWaitLong},
		"deploy wait":                   {got: decideProvisioning(node(nodes.DeployWait), true, false, false, false, with), want: actWaitLong},
		"deploy wait, new image, 1.110": {got: decideProvisioning(node(nodes.DeployWait), false, false, false, false, with), want: actAbort},
		"deploy wait, new image, old":   {got: decideProvisioning(node(nodes.DeployWait), false, false, false, false, without), want: actWaitLong},
		"deploy failed, same image":     {got: decideProvisioning(node(nodes.DeployFail, lastError("checksum")), true, false, false, false, with), want: actFail, wantMsg: "Image provisioning failed: checksum"},
		"deploy failed, restart":        {got: decideProvisioning(node(nodes.DeployFail), true, false, true, false, with), want: actDeploy},
		"deploy aborted (lost agent)":   {got: decideProvisioning(node(nodes.DeployFail, lastError("By request, the deploy operation was aborted")), true, false, false, false, with), want: actDeploy},
		"deploy failed after an abort":  {got: decideProvisioning(node(nodes.DeployFail, lastError("Failed to clean up deploying after aborting the operation")), true, false, false, false, with), want: actFail, wantMsg: "after aborting"},
		"deploy failed, new image":      {got: decideProvisioning(node(nodes.DeployFail), false, false, false, false, with), want: actDeploy},
		// Ironic refuses a change of deploy_interface in deploy failed (InvalidState, 409): a live
		// ISO or a custom deploy after a failed direct deploy (or back) undeploys first.
		"deploy failed, other interface":          {got: decideProvisioning(node(nodes.DeployFail), false, true, false, false, with), want: actUndeploy},
		"deploy failed, restart, other interface": {got: decideProvisioning(node(nodes.DeployFail), false, true, true, false, with), want: actUndeploy},
		"available, other interface":              {got: decideProvisioning(node(nodes.Available), false, true, false, false, with), want: actDeploy},
		"active":                                  {got: decideProvisioning(node(nodes.Active), true, false, false, false, with), want: actDone},
		"enroll":                                  {got: decideProvisioning(node(nodes.Enroll), true, false, false, false, with), want: actUnexpected},
		// An undeploy of its own (forced reboot before 1.110, another deploy interface) that
		// ended in error: reported (the host deprovisions), undeployed again when retried.
		"error after an undeploy":          {got: decideProvisioning(node(nodes.Error, lastError("power off failed")), true, false, false, false, without), want: actFail, wantMsg: "Undeploying before the new deployment failed: power off failed"},
		"error after an undeploy, retried": {got: decideProvisioning(node(nodes.Error), true, false, true, false, without), want: actUndeploy},
		"error, still tearing down":        {got: decideProvisioning(node(nodes.Error, reserved), true, false, false, false, without), want: actWaitShort},
		// A forced reboot stops a deployment waiting for its agent: aborted with 1.110 (deploy
		// failed, by request, deployed again), undeployed before; nothing else is interrupted.
		"forced: deploy wait, 1.110": {got: decideProvisioning(node(nodes.DeployWait), true, false, false, true, with), want: actAbort},
		"forced: deploy wait, old":   {got: decideProvisioning(node(nodes.DeployWait), true, false, false, true, without), want: actUndeploy},
		"forced: deploying":          {got: decideProvisioning(node(nodes.Deploying), true, false, false, true, with), want: actWaitLong},
		"forced: cleaning":           {got: decideProvisioning(node(nodes.CleanWait), true, false, false, true, with), want: actWaitLong},
		"forced: active":             {got: decideProvisioning(node(nodes.Active), true, false, false, true, with), want: actDone},
		// The abort leaves the server on with its agent (fast track): off before the next deploy.
		"aborted, server on":             {got: decideProvisioning(node(nodes.DeployFail, lastError(deployAborted), power(powerOn, "")), true, false, false, false, with), want: actPowerOff},
		"aborted, powering off":          {got: decideProvisioning(node(nodes.DeployFail, lastError(deployAborted), power(powerOn, "power off")), true, false, false, false, with), want: actWaitShort},
		"aborted, server off":            {got: decideProvisioning(node(nodes.DeployFail, lastError(deployAborted), power("power off", "")), true, false, false, false, with), want: actDeploy},
		"aborted, power off disabled":    {got: decideProvisioning(node(nodes.DeployFail, lastError(deployAborted), power(powerOn, ""), func(n *nodes.Node) { n.DisablePowerOff = true }), true, false, false, false, with), want: actDeploy},
		"failed (retried), server on":    {got: decideProvisioning(node(nodes.DeployFail, lastError("checksum"), power(powerOn, "")), true, false, true, false, with), want: actDeploy},
		"forced: deploy failed, by hand": {got: decideProvisioning(node(nodes.DeployFail, lastError("checksum")), true, false, false, true, with), want: actFail, wantMsg: "checksum"},
	})
}

const deployAborted = "By request, the deploy operation was aborted during or after the completion of step \"deploy.deploy\""

func TestDecideDeprovisioning(t *testing.T) {
	checkDecisions(t, map[string]decideCase{
		"active":                  {got: decideDeprovisioning(node(nodes.Active), false), want: actUndeploy},
		"deploy failed":           {got: decideDeprovisioning(node(nodes.DeployFail), false), want: actUndeploy},
		"deploy wait":             {got: decideDeprovisioning(node(nodes.DeployWait), false), want: actUndeploy},
		"deploy hold":             {got: decideDeprovisioning(node(nodes.DeployHold), false), want: actAbort}, // Ironic has no deploy hold → deleting
		"deleting":                {got: decideDeprovisioning(node(nodes.Deleting), false), want: actWaitLong},
		"automated clean wait":    {got: decideDeprovisioning(node(nodes.CleanWait, target("available")), false), want: actWaitLong},
		"manual clean wait":       {got: decideDeprovisioning(node(nodes.CleanWait, target("manageable")), false), want: actAbort},
		"error":                   {got: decideDeprovisioning(node(nodes.Error, lastError("x")), false), want: actFail, wantMsg: "Deprovisioning failed: x"},
		"error, restart":          {got: decideDeprovisioning(node(nodes.Error), true), want: actUndeploy},
		"error, still held":       {got: decideDeprovisioning(node(nodes.Error, reserved), false), want: actWaitShort},
		"clean failed":            {got: decideDeprovisioning(node(nodes.CleanFail, lastError("disk")), false), want: actFail, wantMsg: "Cleaning failed: disk"},
		"clean failed, restart":   {got: decideDeprovisioning(node(nodes.CleanFail), true), want: actManage},
		"clean aborted by us":     {got: decideDeprovisioning(node(nodes.CleanFail, lastError("Clean operation aborted")), false), want: actManage},
		"the record check failed": {got: decideDeprovisioning(node(nodes.CleanFail, lastError("not updated"), checkRan), false), want: actManage},
		"abort tearing down":      {got: decideDeprovisioning(node(nodes.CleanFail, reserved), false), want: actWaitShort},
		"manageable":              {got: decideDeprovisioning(node(nodes.Manageable), false), want: actProvide},
		"available":               {got: decideDeprovisioning(node(nodes.Available), false), want: actDone},
		"adopting":                {got: decideDeprovisioning(node(nodes.Adopting), false), want: actWaitShort},
		"adopt failed":            {got: decideDeprovisioning(node(nodes.AdoptFail), false), want: actManage},
		"inspecting (unexpected)": {got: decideDeprovisioning(node(nodes.Inspecting), false), want: actUnexpected},
		"servicing":               {got: decideDeprovisioning(node(nodes.Servicing), false), want: actWaitLong},
		"service wait":            {got: decideDeprovisioning(node(nodes.ServiceWait), false), want: actAbort},
		"service failed":          {got: decideDeprovisioning(node(nodes.ServiceFail, lastError("bios")), false), want: actUndeploy},
	})
}

func TestDecideBeforeDeletion(t *testing.T) {
	abortable := Features{DeployWaitAbort: true}
	checkDecisions(t, map[string]decideCase{
		"inspect wait":              {got: decideBeforeDeletion(node(nodes.InspectWait, target("manageable")), Features{}), want: actAbort},
		"manual clean wait":         {got: decideBeforeDeletion(node(nodes.CleanWait, target("manageable")), Features{}), want: actAbort},
		"manual clean hold":         {got: decideBeforeDeletion(node(nodes.CleanHold, target("manageable")), Features{}), want: actAbort},
		"automated clean wait":      {got: decideBeforeDeletion(node(nodes.CleanWait, target("available")), Features{}), want: actWaitShort},
		"service wait":              {got: decideBeforeDeletion(node(nodes.ServiceWait, target("active")), Features{}), want: actAbort},
		"rescue wait":               {got: decideBeforeDeletion(node(nodes.RescueWait, target("rescue")), Features{}), want: actAbort},
		"deploy hold":               {got: decideBeforeDeletion(node(nodes.DeployHold, target("active")), Features{}), want: actAbort},
		"deploy wait, abortable":    {got: decideBeforeDeletion(node(nodes.DeployWait, target("active")), abortable), want: actAbort},
		"deploy wait, before 1.110": {got: decideBeforeDeletion(node(nodes.DeployWait, target("active")), Features{}), want: actWaitShort},
		// Ironic powers the server on from these: the host must not be taken for off.
		"inspecting, server off":     {got: decideBeforeDeletion(node(nodes.Inspecting, target("manageable"), power(powerOff, "")), Features{}), want: actWaitShort},
		"cleaning":                   {got: decideBeforeDeletion(node(nodes.Cleaning, target("manageable")), Features{}), want: actWaitShort},
		"inspect failed":             {got: decideBeforeDeletion(node(nodes.InspectFail, target("manageable")), Features{}), want: actDone},
		"clean failed":               {got: decideBeforeDeletion(node(nodes.CleanFail, target("manageable")), Features{}), want: actDone},
		"clean failed, tearing down": {got: decideBeforeDeletion(node(nodes.CleanFail, target("manageable"), reserved), Features{}), want: actWaitShort},
		"manageable":                 {got: decideBeforeDeletion(node(nodes.Manageable), Features{}), want: actDone},
		"available":                  {got: decideBeforeDeletion(node(nodes.Available), Features{}), want: actDone},
		"active":                     {got: decideBeforeDeletion(node(nodes.Active), Features{}), want: actDone},
	})
}

func TestDecideAdoption(t *testing.T) {
	withImage := func(n *nodes.Node) { n.InstanceInfo["image_source"] = "http://x/img" }
	checkDecisions(t, map[string]decideCase{
		"active (steady state)":            {got: decideAdoption(node(nodes.Active), metal3.StateProvisioned, true, false), want: actDone},
		"re-registered":                    {got: decideAdoption(node(nodes.Manageable), metal3.StateProvisioned, true, false), want: actAdopt},
		"deprovisioning, nothing to adopt": {got: decideAdoption(node(nodes.Manageable), metal3.StateDeprovisioning, false, false), want: actDone},
		"deprovisioning, image on node":    {got: decideAdoption(node(nodes.Manageable, withImage), metal3.StateDeprovisioning, false, false), want: actAdopt},
		"available":                        {got: decideAdoption(node(nodes.Available), metal3.StateProvisioned, true, false), want: actManage},
		"adopting":                         {got: decideAdoption(node(nodes.Adopting), metal3.StateProvisioned, true, false), want: actWaitShort},
		"adopt failed":                     {got: decideAdoption(node(nodes.AdoptFail, lastError("x")), metal3.StateProvisioned, true, false), want: actFail, wantMsg: "Host adoption failed: x"},
		"adopt failed, restart":            {got: decideAdoption(node(nodes.AdoptFail), metal3.StateProvisioned, true, true), want: actAdopt},
		"adopt failed, still held":         {got: decideAdoption(node(nodes.AdoptFail, reserved), metal3.StateProvisioned, true, false), want: actWaitShort},
		"enroll":                           {got: decideAdoption(node(nodes.Enroll), metal3.StateProvisioned, true, false), want: actUnexpected},
		"servicing":                        {got: decideAdoption(node(nodes.ServiceWait), metal3.StateProvisioned, true, false), want: actDone},
	})
}

// staleStepError is Ironic 39's last_error of a bios.apply_configuration retried after it failed
// at its reboot (docs/ironic-notes.md).
const staleStepError = "Unexpected error when processing next service step. InvalidState: Can not transition from state 'service failed' on event 'done' (no defined transition)"

func TestFailedOnStaleStep(t *testing.T) {
	for text, want := range map[string]bool{
		staleStepError: true,
		"Node x failed step {'step': 'apply_configuration'}: Redfish exception occurred. Error: Reboot failed": false,
		"The servicing state can't be resumed by conductor c-1. Moving to fail state.":                         false,
		"": false,
	} {
		if got := failedOnStaleStep(node(nodes.ServiceFail, lastError(text))); got != want {
			t.Errorf("failedOnStaleStep(%q) = %t, want %t", text, got, want)
		}
	}
}

func TestDecideServicing(t *testing.T) {
	steps := serviceFacts{hasSteps: true}
	ran := serviceFacts{hasSteps: true, requested: true, ran: true}
	with := func(f serviceFacts, mod func(*serviceFacts)) serviceFacts { mod(&f); return f }
	current := with(ran, func(f *serviceFacts) { f.current = true })
	failedRun := with(ran, func(f *serviceFacts) { f.failed = "Servicing failed: bios" })
	aborted := "By request, the service operation was aborted"
	checkDecisions(t, map[string]decideCase{
		"steps":                       {got: decideServicing(node(nodes.Active), steps), want: actService},
		"this attempt's run finished": {got: decideServicing(node(nodes.Active), current), want: actDone},
		// The request changed (or its updates were recorded) while it ran: still done.
		"this attempt's run, request changed since": {got: decideServicing(node(nodes.Active), with(current, func(f *serviceFacts) { f.ran, f.requested = false, false })), want: actDone},
		"this attempt's run, changes taken back":    {got: decideServicing(node(nodes.Active), with(current, func(f *serviceFacts) { f.hasSteps = false })), want: actDone},
		"nothing to do":                             {got: decideServicing(node(nodes.Active), serviceFacts{}), want: actDone},
		"an earlier attempt's run":                  {got: decideServicing(node(nodes.Active), ran), want: actService},
		"this attempt's run aborted (lost agent)":   {got: decideServicing(node(nodes.Active), with(current, func(f *serviceFacts) { f.aborted = true })), want: actService},
		"abort still tearing down":                  {got: decideServicing(node(nodes.Active, reserved), current), want: actWaitShort},
		"failed, then aborted by an admin":          {got: decideServicing(node(nodes.Active), failedRun), want: actFail, wantMsg: "Servicing failed: bios"},
		"failed, aborted by an admin, this attempt": {got: decideServicing(node(nodes.Active), with(failedRun, func(f *serviceFacts) { f.current = true })), want: actFail, wantMsg: "Servicing failed: bios"},
		"failed, aborted by an admin, retried":      {got: decideServicing(node(nodes.Active), with(failedRun, func(f *serviceFacts) { f.retry = true })), want: actService},
		"servicing":                                 {got: decideServicing(node(nodes.Servicing), ran), want: actWaitLong},
		"servicing, taken back":                     {got: decideServicing(node(nodes.Servicing), serviceFacts{}), want: actWaitLong},
		"service wait":                              {got: decideServicing(node(nodes.ServiceWait), ran), want: actWaitLong},
		"service wait, taken back":                  {got: decideServicing(node(nodes.ServiceWait), serviceFacts{}), want: actAbort},
		"service hold, taken back":                  {got: decideServicing(node(nodes.ServiceHold), serviceFacts{}), want: actAbort},
		"failed":                                    {got: decideServicing(node(nodes.ServiceFail, lastError("bios")), ran), want: actFail, wantMsg: "Servicing failed: bios"},
		"failed, taken back":                        {got: decideServicing(node(nodes.ServiceFail), serviceFacts{}), want: actAbort},
		"failed, the host retries":                  {got: decideServicing(node(nodes.ServiceFail, lastError("bios")), with(ran, func(f *serviceFacts) { f.retry = true })), want: actService},
		"failed, request changed":                   {got: decideServicing(node(nodes.ServiceFail, lastError("bios")), steps), want: actService},
		"aborted (lost agent)":                      {got: decideServicing(node(nodes.ServiceFail, lastError(aborted)), ran), want: actService},
		// current and not aborted: serviceFactsOf found the abort let the last step end first.
		"this attempt's run aborted after its last step": {got: decideServicing(node(nodes.ServiceFail,
			lastError(aborted+` during or after the completion of step "firmware.update"`)), current), want: actAbort},
		"Ironic restarted in it": {got: decideServicing(node(nodes.ServiceFail,
			lastError("The servicing state can't be resumed by conductor c-1. Moving to fail state.")), ran), want: actService},
		"failed on a stale step": {got: decideServicing(node(nodes.ServiceFail,
			lastError(staleStepError)), with(ran, func(f *serviceFacts) { f.staleRestart = true })), want: actService},
		"failed on a stale step again": {got: decideServicing(node(nodes.ServiceFail,
			lastError(staleStepError)), ran), want: actFail, wantMsg: "Servicing failed: " + staleStepError},
		// A restarted operator has no memory of its stale-step restart, nor of a start Ironic
		// refused (ran false): the recorded failure is reported, not started again.
		"failed on a stale step again, reported, after a restart": {got: decideServicing(node(nodes.ServiceFail,
			lastError(staleStepError)), with(ran, func(f *serviceFacts) { f.staleRestart, f.failed = true, "Servicing failed: "+staleStepError })),
			want: actFail, wantMsg: "Servicing failed: " + staleStepError},
		"a start refused, reported": {got: decideServicing(node(nodes.ServiceFail, lastError("bios")), with(ran, func(f *serviceFacts) { f.ran, f.failed = false, "Servicing could not start: 400" })),
			want: actFail, wantMsg: "Servicing could not start: 400"},
		"a start refused, reported, the host retries": {got: decideServicing(node(nodes.ServiceFail, lastError("bios")), with(ran, func(f *serviceFacts) { f.ran, f.failed, f.retry = false, "Servicing could not start: 400", true })),
			want: actService},
		"abort tearing down": {got: decideServicing(node(nodes.ServiceFail, reserved), ran), want: actWaitShort},
		"manageable":         {got: decideServicing(node(nodes.Manageable), steps), want: actUnexpected},
	})
}

func TestDecidePower(t *testing.T) {
	soft, hard := metal3.RebootModeSoft, metal3.RebootModeHard
	checkDecisions(t, map[string]decideCase{
		"on: done":                    {got: decidePowerOn(node(nodes.Active, power(powerOn, "")), ""), want: actDone},
		"on: pending":                 {got: decidePowerOn(node(nodes.Active, power(powerOff, powerOn)), powerOn), want: actWaitShort},
		"on: start":                   {got: decidePowerOn(node(nodes.Active, power(powerOff, "")), ""), want: actPowerOn},
		"on: tried and failed":        {got: decidePowerOn(node(nodes.Active, power(powerOff, ""), lastError("timeout")), powerOn), want: actFail, wantMsg: "Power on failed: timeout"},
		"on: failure reported, again": {got: decidePowerOn(node(nodes.Active, power(powerOff, ""), lastError("timeout")), ""), want: actPowerOn},
		"on: old error, not ours":     {got: decidePowerOn(node(nodes.Active, power(powerOff, ""), lastError("old")), ""), want: actPowerOn},
		"on: provision state change":  {got: decidePowerOn(node(nodes.Deploying, power(powerOff, ""), target("active")), ""), want: actWaitShort},
		"off: done":                   {got: decidePowerOff(node(nodes.Active, power(powerOff, "")), soft, "", false), want: actDone},
		"off: soft":                   {got: decidePowerOff(node(nodes.Active, power(powerOn, "")), soft, "", false), want: actSoftPowerOff},
		"off: hard":                   {got: decidePowerOff(node(nodes.Active, power(powerOn, "")), hard, "", false), want: actPowerOff},
		"off: forced":                 {got: decidePowerOff(node(nodes.Active, power(powerOn, "")), soft, "", true), want: actPowerOff},
		"off: soft did not take":      {got: decidePowerOff(node(nodes.Active, power(powerOn, ""), lastError("timeout")), soft, softPowerOff, false), want: actPowerOff},
		"off: pending soft":           {got: decidePowerOff(node(nodes.Active, power(powerOn, softPowerOff)), soft, softPowerOff, false), want: actWaitShort},
		// Deletion powers off forced: its failures are reported too (errorCount reaches the
		// limit at which deletion goes on), and the call after a report asks again.
		"off: forced failed":           {got: decidePowerOff(node(nodes.Active, power(powerOn, ""), lastError("bmc")), hard, powerOff, true), want: actFail, wantMsg: "Power off failed: bmc"},
		"off: failure reported, again": {got: decidePowerOff(node(nodes.Active, power(powerOn, ""), lastError("bmc")), hard, "", true), want: actPowerOff},
		"off: hard failed":             {got: decidePowerOff(node(nodes.Active, power(powerOn, ""), lastError("bmc")), hard, powerOff, false), want: actFail, wantMsg: "Power off failed: bmc"},
		// A failed state keeps its target, and Ironic takes power changes there.
		"off: inspect failed keeps its target": {got: decidePowerOff(node(nodes.InspectFail, power(powerOn, ""), target("manageable")), hard, "", false), want: actPowerOff},
		"on: clean failed keeps its target":    {got: decidePowerOn(node(nodes.CleanFail, power(powerOff, ""), target("available")), ""), want: actPowerOn},
		"off: disabled":                        {got: decidePowerOff(node(nodes.Active, power(powerOn, ""), func(n *nodes.Node) { n.DisablePowerOff = true }), hard, "", false), want: actFail, wantMsg: "disablePowerOff"},
	})
}

// TestDecideReboot: a reboot is asked once and followed until Ironic has no power change pending,
// so the caller can tell a reboot done from one still to ask.
func TestDecideReboot(t *testing.T) {
	soft, hard := metal3.RebootModeSoft, metal3.RebootModeHard
	disabled := func(n *nodes.Node) { n.DisablePowerOff = true }
	checkDecisions(t, map[string]decideCase{
		"soft from on":                   {got: decideReboot(node(nodes.Active, power(powerOn, "")), soft, ""), want: actSoftReboot},
		"hard from on":                   {got: decideReboot(node(nodes.Active, power(powerOn, "")), hard, ""), want: actReboot},
		"soft from off is hard":          {got: decideReboot(node(nodes.Active, power(powerOff, "")), soft, ""), want: actReboot},
		"deploy failed keeps its target": {got: decideReboot(node(nodes.DeployFail, power(powerOn, ""), target("active")), hard, ""), want: actReboot},
		"power off disabled":             {got: decideReboot(node(nodes.Active, power(powerOn, ""), disabled), soft, ""), want: actSoftReboot},
		"another power change":           {got: decideReboot(node(nodes.Active, power(powerOn, powerOff)), hard, ""), want: actWaitShort},
		"provision state change":         {got: decideReboot(node(nodes.Deploying, power(powerOn, ""), target("active")), hard, ""), want: actWaitShort},
		"asked, running":                 {got: decideReboot(node(nodes.Active, power(powerOn, powerOn)), hard, rebooting), want: actWaitShort},
		"asked, done":                    {got: decideReboot(node(nodes.Active, power(powerOn, "")), hard, rebooting), want: actDone},
		"asked soft, done":               {got: decideReboot(node(nodes.Active, power(powerOn, ""), disabled), soft, softRebooting), want: actDone},
		"asked, failed":                  {got: decideReboot(node(nodes.Active, power(powerOn, ""), lastError("bmc")), hard, rebooting), want: actFail, wantMsg: "Reboot failed: bmc"},
		"old error, not ours":            {got: decideReboot(node(nodes.Active, power(powerOn, ""), lastError("old")), hard, ""), want: actReboot},
		"after a power off, a reboot":    {got: decideReboot(node(nodes.Active, power(powerOff, "")), hard, powerOff), want: actReboot},
	})
}

// TestResult maps the simple decisions to results with metal3's delays and sanitized messages.
func TestResult(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoint = "http://127.0.0.1:1/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	p.jitter = func() float64 { return 1 } // the most jitter
	now := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	host := provisioner.Host{BMCCredentials: provisioner.Credentials{Password: "hunter22"}}

	deploying := node(nodes.Deploying)
	if res, ok := p.result(do(actDone), deploying, host); !ok || res.Busy || res.Failed() {
		t.Errorf("done: %+v", res)
	}
	if res, _ := p.result(do(actWaitShort), deploying, host); !res.Busy || res.RequeueAfter != 3750*time.Millisecond {
		t.Errorf("short wait: %+v, want busy for 3s + 25%%", res)
	}
	if res, _ := p.result(do(actWaitLong), deploying, host); !res.Busy || res.RequeueAfter != 12500*time.Millisecond {
		t.Errorf("long wait: %+v, want busy for 10s + 25%%", res)
	}
	p.jitter = func() float64 { return 0 }
	if res, _ := p.result(do(actWaitLong), deploying, host); res.RequeueAfter != 10*time.Second {
		t.Errorf("long wait without jitter: %s", res.RequeueAfter)
	}
	msg := "Deploy failed (req-0f8a6f3c-1111-2222-3333-444455556666): bad password hunter22. Extended information: [{'Message': 'x [y]'}]"
	failed := node(nodes.DeployFail, lastError(msg))
	res, _ := p.result(fail("Image provisioning failed", failed), failed, host)
	if !res.Failed() || strings.Contains(res.ErrorMessage, "hunter22") || strings.Contains(res.ErrorMessage, "req-") ||
		strings.Contains(res.ErrorMessage, "Extended") {
		t.Errorf("failure message not sanitized: %q", res.ErrorMessage)
	}
	if _, ok := p.result(do(actDeploy), deploying, host); ok {
		t.Error("an action that needs carrying out was turned into a result")
	}
	if res, _ := p.result(do(actWaitLong), deploying, host); res.Waiting != "" {
		t.Errorf("a node just put in deploying is reported as stalled: %q", res.Waiting)
	}
	deploying.ProvisionUpdatedAt = now.Add(-time.Hour)
	if res, _ := p.result(do(actWaitLong), deploying, host); !res.Busy || !strings.Contains(res.Waiting, "no conductor") {
		t.Errorf("a node left in deploying for an hour: %+v, want busy and saying Ironic stopped working on it", res)
	}
}

// TestStalled tells a node Ironic stopped working on (working state, no lock, for stallAfter) from
// one it works on or waits in.
func TestStalled(t *testing.T) {
	now := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	since := func(d time.Duration) func(*nodes.Node) {
		return func(n *nodes.Node) { n.ProvisionUpdatedAt = now.Add(-d) }
	}
	locked := func(n *nodes.Node) { n.Reservation = "metalforge-conductor" }
	for name, c := range map[string]struct {
		n    *nodes.Node
		want bool
	}{
		"deploying, unlocked, 11 min":     {node(nodes.Deploying, since(11*time.Minute)), true},
		"cleaning, unlocked, 1 h":         {node(nodes.Cleaning, since(time.Hour)), true},
		"deploying, unlocked, 9 min":      {node(nodes.Deploying, since(9*time.Minute)), false},
		"deploying, locked, 1 h":          {node(nodes.Deploying, since(time.Hour), locked), false},
		"wait call-back, unlocked, 1 h":   {node(nodes.DeployWait, since(time.Hour)), false},
		"active, unlocked, 1 h":           {node(nodes.Active, since(time.Hour)), false},
		"deploying, no provision_updated": {node(nodes.Deploying), false},
		"servicing, unlocked, 10 min":     {node(nodes.Servicing, since(10*time.Minute)), true},
		"inspect wait, unlocked, 1 h":     {node(nodes.InspectWait, since(time.Hour)), false},
		"verifying, unlocked, 30 min":     {node(nodes.Verifying, since(30*time.Minute)), true},
		"deleting, redacted reservation":  {node(nodes.Deleting, since(time.Hour), func(n *nodes.Node) { n.Reservation = "** Redacted **" }), false},
	} {
		if stalledFor(c.n, now, 0) {
			t.Errorf("%s: stalled with StalledNodeAfter 0, which turns deletion off", name)
		}
		got := stalled(c.n, now)
		if (got != "") != c.want {
			t.Errorf("%s: stalled = %q, want stalled %v", name, got, c.want)
		}
		if c.want && (!strings.Contains(got, c.n.ProvisionState) || !strings.Contains(got, c.n.ProvisionUpdatedAt.Format(time.RFC3339))) {
			t.Errorf("%s: %q does not name the state and since when", name, got)
		}
		if later := stalled(c.n, now.Add(time.Hour)); got != "" && later != got {
			t.Errorf("%s: the message changes as time passes (%q, then %q): every change is a status write", name, got, later)
		}
	}
}
