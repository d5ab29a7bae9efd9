package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/statustext"
)

// A DataImage (same name as its host) is a non-bootable ISO the host's operating system reads from
// its virtual CD. As in metal3, the host attaches and detaches it at one moment only: a provisioned
// (or externally provisioned) host is off and about to be powered on, so the operating system sees
// the change when it boots and a running one never has its CD pulled. The host waits with its
// power on until the CD holds what the DataImage asks (nothing once it is being deleted); the
// DataImage controller (internal/controller/dataimage) owns everything else: owner reference,
// finalizer, the URL check, deletion while the host does not run an OS.
//
// The DataImage's status says where the host stands: attachedImage is the image asked of the
// provisioner (set when asked, as metal3 does: Ironic serves the image from its own URL, so the
// attached URL cannot be read back); an attach or detach under way has an error entry without a
// message; a failed one has the provisioner's message and counts towards the retry's backoff.

// dataImageBusyRetry is how soon a host looks again while the provisioner works on its CD.
const dataImageBusyRetry = 5 * time.Second

// dataImageStep is what a host about to be powered on does with its DataImage.
type dataImageStep int

const (
	// dataImageReady: the CD holds what is asked; power on.
	dataImageReady dataImageStep = iota
	// dataImageWait: an attach or detach is under way, or a failed one waits for its retry.
	dataImageWait
	dataImageAttach
	dataImageDetach
)

// dataImagePlan is decideDataImage's answer: the step, how long a wait lasts, and a failure to
// record (counted, with the provisioner's message).
type dataImagePlan struct {
	step    dataImageStep
	after   time.Duration
	failure string
	// count is the failure count to record: with failure, or with the attach or detach asked
	// (reset for a new image).
	count int
	// forget: the recorded attachedImage is no longer in the CD (its attach failed, or the image
	// was ejected behind the operator's back, by Ironic's cleaning say).
	forget bool
}

// decideDataImage is the pure decision: want is the URL the CD should hold ("" for nothing),
// status the DataImage's, st what the provisioner reports. backoff is the retry delay after n
// failures.
func decideDataImage(want string, status metal3.DataImageStatus, st provisioner.DataImageState, now time.Time,
	backoff func(int) time.Duration) dataImagePlan {
	if st.Busy {
		return dataImagePlan{step: dataImageWait, after: dataImageBusyRetry}
	}
	recorded := ""
	if status.AttachedImage != nil {
		recorded = status.AttachedImage.URL
	}
	count, message := 0, ""
	if e := status.Error; e != nil {
		count, message = e.Count, e.Message
	}
	// An attach or detach of ours is under way: asked (lastReconciled), no message since.
	underWay := status.Error != nil && message == "" && status.LastReconciled != nil
	if strings.HasPrefix(message, attachingPrefix) && !strings.HasPrefix(message, attachingPrefix+quotedURL(want)+":") {
		// The failures were of another image (the user changed spec.url since): this one is
		// tried at once, its failures counted anew; the failure the provisioner still reports is
		// the old image's.
		count, message, underWay = 0, "", false
	}
	plan := dataImagePlan{count: count}
	if st.Error != "" && underWay && (recorded == "" || recorded == want) {
		// Only a failure of our own attempt counts: the provisioner keeps the last one until it
		// is asked again, whatever asked it. One of an image no longer wanted (spec.url changed
		// while it was attached) is not: the new image is tried at once.
		if st.Attached {
			plan.failure = "detaching: " + st.Error
		} else {
			plan.failure = attachingMessage(want, st.Error)
		}
	}
	if recorded != "" && !st.Attached {
		// Asked and not there: failed, or ejected since.
		plan.forget, recorded = true, ""
	}
	switch {
	case st.Attached && recorded != "" && recorded == want, !st.Attached && want == "":
		plan.step, plan.failure = dataImageReady, ""
	case plan.failure != "":
		plan.step, plan.after, plan.count = dataImageWait, backoff(count+1), count+1
	case count > 0 && message != "" && now.Before(lastTry(status).Add(backoff(count))):
		plan.step, plan.after = dataImageWait, lastTry(status).Add(backoff(count)).Sub(now)
	case st.Attached:
		// Another image (an older spec, or one the status does not know): out first.
		plan.step = dataImageDetach
	default:
		plan.step = dataImageAttach
	}
	return plan
}

// attachingPrefix starts the message of a failed attach, which names the image (credentials
// removed), so that a new spec.url is told from the one that failed.
const attachingPrefix = "attaching "

func attachingMessage(url, reason string) string {
	return attachingPrefix + quotedURL(url) + ": " + reason
}

// quotedURL is the image's URL as failure messages name it: credentials removed, cut to 1 KiB,
// between double quotes, which end every redaction pattern (a credential query value would
// otherwise swallow the colon after it when the message is cleaned for status) and survive the
// cleaning unchanged, so that the prefix can be compared with the next spec.url.
func quotedURL(url string) string {
	return `"` + statustext.Cap(strings.ReplaceAll(statustext.Redact(url), `"`, "%22"), 1024) + `"`
}

func lastTry(status metal3.DataImageStatus) time.Time {
	if status.LastReconciled == nil {
		return time.Time{}
	}
	return status.LastReconciled.Time
}

// dataImageWrite is the host's write of its DataImage's status, before the host's own status.
type dataImageWrite struct {
	base, obj *metal3.DataImage
	events    events.List
}

// loadDataImage reads the host's DataImage where it may be attached (provisioned states). A
// cached copy older than the host's own last write of it is marked, so that the host waits for the
// write instead of asking the provisioner again.
func (r *Reconciler) loadDataImage(ctx context.Context, s *hostScope) error {
	di := &metal3.DataImage{}
	key := types.NamespacedName{Namespace: s.host.Namespace, Name: s.host.Name}
	if err := r.Client.Get(ctx, key, di); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading data image %s: %w", key, err)
	}
	s.in.dataImage = di
	s.in.dataImageStale = r.dataImages.Stale(di)
	return nil
}

// syncDataImage brings the host's virtual CD to what its DataImage asks before the host is
// powered on (or, for a host whose power off is disabled, rebooted in place); false when that may
// go ahead.
func (s *hostScope) syncDataImage() (outcome, bool) {
	di := s.in.dataImage
	if di == nil {
		return outcome{}, false
	}
	if s.in.dataImageStale {
		return waitFor(staleRetry, "the data image's status to be read back"), true
	}
	want := di.Spec.URL
	if !di.DeletionTimestamp.IsZero() {
		want = ""
	} else if dataimage.ValidateURL(want) != nil {
		return outcome{}, false // the DataImage controller reports it; the host is not held off
	}
	host := s.provHost()
	w := &dataImageWrite{base: di, obj: di.DeepCopy()}
	status := &w.obj.Status
	st, err := s.prov.DataImage(s.ctx, host)
	if errors.Is(err, provisioner.ErrDataImageUnsupported) {
		// Nothing can be attached to this host: said in the DataImage, the host goes on.
		if status.Error == nil || status.Error.Message != dataimage.Message(err.Error()) {
			status.Error = &metal3.DataImageError{Message: dataimage.Message(err.Error())}
			w.events.Warning(dataimage.ReasonFailed, "Attach", status.Error.Message)
		}
		s.fx.dataImage = w
		return outcome{}, false
	}
	if err != nil {
		return s.provError(err, "reading the virtual media of"), true
	}
	plan := decideDataImage(want, di.Status, st, s.wall, s.cfg.Backoff)
	if plan.forget {
		status.AttachedImage = nil
	}
	var res provisioner.Result
	switch plan.step {
	case dataImageReady:
		status.Error = nil
		s.fx.dataImage = w
		return outcome{}, false
	case dataImageWait:
		if plan.failure != "" {
			status.Error = &metal3.DataImageError{Count: plan.count, Message: dataimage.Message(plan.failure)}
			w.events.Warning(dataimage.ReasonFailed, failureAction(plan.failure), "Virtual media of the host: "+status.Error.Message)
		}
		s.fx.dataImage = w
		return waitFor(plan.after, "its DataImage to be attached or detached before it powers on"), true
	case dataImageAttach:
		res, err = s.prov.AttachDataImage(s.ctx, host, want)
	case dataImageDetach:
		res, err = s.prov.DetachDataImage(s.ctx, host)
	}
	if err != nil {
		return s.provError(err, "changing the virtual media of"), true
	}
	if res.Busy {
		// Not taken (the provisioner works on the host): nothing to record yet.
		return waitFor(max(res.RequeueAfter, time.Second), "the provisioner to take its virtual media change"), true
	}
	status.LastReconciled = &metav1.Time{Time: s.now.Time}
	// Under way: an error entry without a message, so that its failure is counted once.
	status.Error = &metal3.DataImageError{Count: plan.count}
	switch {
	case res.Failed():
		msg := "detaching: " + res.ErrorMessage
		if plan.step == dataImageAttach {
			msg = attachingMessage(want, res.ErrorMessage)
		}
		status.Error = &metal3.DataImageError{Count: plan.count + 1, Message: dataimage.Message(msg)}
		w.events.Warning(dataimage.ReasonFailed, failureAction(msg), "Virtual media of the host: "+status.Error.Message)
	case plan.step == dataImageAttach:
		status.AttachedImage = &metal3.AttachedImageReference{URL: want}
		w.events.Normal(dataimage.ReasonAttaching, "Attach", "Attaching "+statustext.Redact(want)+" as the host's virtual CD")
	default:
		status.AttachedImage = nil
		w.events.Normal(dataimage.ReasonDetaching, "Detach", "Detaching the host's virtual CD")
	}
	s.fx.dataImage = w
	return waitFor(dataImageBusyRetry, "its DataImage to be attached or detached before it powers on"), true
}

// failureAction is the Event action of a failure message.
func failureAction(msg string) string {
	if strings.HasPrefix(msg, attachingPrefix) {
		return "Attach"
	}
	return "Detach"
}

// writeDataImage writes the DataImage's status (a merge patch of what changed) and announces it.
func (r *Reconciler) writeDataImage(ctx context.Context, w *dataImageWrite) error {
	if w == nil {
		return nil
	}
	// A merge patch of the status fields that changed (the DataImage controller writes others),
	// status.error whole when it changed (see dataimage.StatusBase).
	if _, err := patch.NewHelper(r.Client, dataimage.StatusBase(w.base, w.obj), &r.dataImages).PatchStatus(ctx, w.obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: nothing to record
		}
		return err
	}
	w.events.Emit(r.Recorder, w.obj)
	return nil
}
