package ironic

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// Ironic's power state sync erases a node's last_error whenever the power state it reads matches
// the one it recorded ("Clearing last_error for node … after confirmed power state match", with
// [conductor] node_history on, its default; docs/ironic-notes.md): a node that failed stays in its
// failed state, and within a sync interval nothing on it says why. The reason stays in the node's
// history (API 1.78) as the error event Ironic recorded when it failed the node. Read there, a
// host's error keeps saying why, and a failure that was not the request's (a conductor restart
// in the middle, an abort) is still told from one that was.

// failedStates are the states a node is in because something failed, last_error saying what.
var failedStates = map[nodes.ProvisionState]bool{
	nodes.DeployFail: true, nodes.CleanFail: true, nodes.ServiceFail: true, nodes.InspectFail: true,
	nodes.AdoptFail: true, nodes.RescueFail: true, nodes.Error: true,
}

// failureEventWindow: Ironic records a failure's event before the node enters its failed state,
// earlier by as long as the failure's tear-down took (a power off, media ejected, a lock waited
// for). An error event older than this before the state change belongs to an earlier failure.
const failureEventWindow = 10 * time.Minute

// historyEvent is an entry of GET /v1/nodes/{id}/history.
type historyEvent struct {
	CreatedAt string `json:"created_at"`
	Severity  string `json:"severity"`
	Event     string `json:"event"`
}

// recallLastError returns n, or, when n is in a failed state whose last_error Ironic erased, a
// copy with the reason from the node's history. The history is read once per failure (remembered
// with the time of the state change); a history that cannot be read leaves n as it is. It is not
// read while a conductor still holds the node (the decisions wait for that anyway): Ironic saves
// some failed states before the failure handler records the reason (a deploy timeout's clean-up
// runs after the state change), and read then, the history's newest error is an earlier failure's.
// An abort records nothing in the history: a failed state that follows an abort this provisioner
// asked for, with no error recorded since the aborted operation began, is the abort, and gets
// Ironic's words for it (so the decisions retry it rather than report it).
func (p *Provisioner) recallLastError(ctx context.Context, s *session, n *nodes.Node) *nodes.Node {
	if !failedStates[state(n)] || n.ProvisionUpdatedAt.IsZero() || tearingDown(n) {
		return n
	}
	abort, aborted := p.memory.abortRequested(n.UUID, n.ProvisionUpdatedAt, p.now().Add(-failureEventWindow))
	if n.LastError != "" {
		if aborted {
			p.memory.clearAbortRequested(n.UUID) // this is the failed state the abort led to
		}
		return n
	}
	text, known := p.memory.recalledError(n.UUID, n.ProvisionUpdatedAt)
	if !known {
		oldest := n.ProvisionUpdatedAt.Add(-failureEventWindow)
		if aborted {
			oldest = abort.stateSince // only what the aborted operation recorded
		}
		var err error
		if text, err = p.failureEvent(ctx, s, n, oldest); err != nil {
			p.logger(ctx).Info("Cannot read why the node failed from its history", "node", n.UUID, "provisionState", n.ProvisionState, "reason", err.Error())
			return n
		}
		if text == "" && aborted {
			text = abortedMessage(n)
			p.logger(ctx).Info("Ironic erased the last_error of a node this provisioner aborted: the failure is the abort",
				"node", n.UUID, "provisionState", n.ProvisionState)
		}
		p.memory.setRecalledError(n.UUID, n.ProvisionUpdatedAt, text)
		if aborted {
			p.memory.clearAbortRequested(n.UUID)
		}
	}
	if text == "" {
		return n
	}
	c := *n
	c.LastError = text
	return &c
}

// abortedMessage is Ironic's last_error for an abort of the operation that left n in its failed
// state (conductor/deployments.py, cleaning.py, servicing.py).
func abortedMessage(n *nodes.Node) string {
	op := map[nodes.ProvisionState]string{nodes.DeployFail: "deploy ", nodes.CleanFail: "clean ", nodes.ServiceFail: "service "}[state(n)]
	return "By request, the " + op + "operation was aborted"
}

// failureEvent is the newest error event of the node's history recorded no earlier than oldest
// ("" when there is none).
func (p *Provisioner) failureEvent(ctx context.Context, s *session, n *nodes.Node, oldest time.Time) (string, error) {
	history, err := nodeHistory(ctx, s, n.UUID, 20)
	if err != nil {
		return "", err
	}
	for _, e := range history {
		at, err := parseIronicTime(e.CreatedAt)
		if err != nil || at.Before(oldest) {
			return "", nil // newest first: the rest is older still
		}
		// A failed virtual media attach or detach records an error event too, and may come
		// between the failure and its state change (or after it): it is never the reason.
		if strings.EqualFold(e.Severity, "ERROR") && e.Event != "" && !vmediaFailure(e.Event) {
			return e.Event, nil
		}
	}
	return "", nil
}

// nodeHistory returns up to limit of the node's newest history events, newest first.
func nodeHistory(ctx context.Context, s *session, id string, limit int) ([]historyEvent, error) {
	var body struct {
		History []historyEvent `json:"history"`
	}
	query := url.Values{"detail": {"true"}, "sort_key": {"created_at"}, "sort_dir": {"desc"}, "limit": {strconv.Itoa(limit)}}
	_, err := s.sc.Get(ctx, s.sc.ServiceURL("nodes", id, "history")+"?"+query.Encode(), &body,
		&gophercloud.RequestOpts{OkCodes: []int{200}})
	if err != nil {
		return nil, classifyError(err, "reading the history of Ironic node "+id)
	}
	return body.History, nil
}
