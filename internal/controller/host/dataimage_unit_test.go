package host

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/provisioner"
)

func TestDecideDataImage(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	backoff := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	const url, old = "http://images.example/data.iso", "http://images.example/old.iso"
	const signed = "https://bucket.example/cfg.iso?X-Amz-Date=1&X-Amz-Signature=abc"
	attachedAs := func(u string) *metal3.AttachedImageReference { return &metal3.AttachedImageReference{URL: u} }
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	cases := []struct {
		name   string
		want   string
		status metal3.DataImageStatus
		st     provisioner.DataImageState
		step   dataImageStep
		after  time.Duration
		fail   string
		count  int
		forget bool
	}{
		{name: "busy provisioner waits", want: url, st: provisioner.DataImageState{Busy: true},
			step: dataImageWait, after: dataImageBusyRetry},
		{name: "nothing asked, nothing attached", want: "", step: dataImageReady},
		{name: "new image is attached", want: url, step: dataImageAttach},
		{name: "attached as asked", want: url, status: metal3.DataImageStatus{AttachedImage: attachedAs(url)},
			st: provisioner.DataImageState{Attached: true}, step: dataImageReady},
		{name: "spec changed: old image out first", want: url, status: metal3.DataImageStatus{AttachedImage: attachedAs(old)},
			st: provisioner.DataImageState{Attached: true}, step: dataImageDetach},
		{name: "an unknown image is taken out", want: url, st: provisioner.DataImageState{Attached: true}, step: dataImageDetach},
		{name: "deleted DataImage: detach", want: "", status: metal3.DataImageStatus{AttachedImage: attachedAs(url)},
			st: provisioner.DataImageState{Attached: true}, step: dataImageDetach},
		{name: "our attach failed: counted, forgotten, backoff", want: url,
			status: metal3.DataImageStatus{AttachedImage: attachedAs(url), Error: &metal3.DataImageError{}, LastReconciled: ago(time.Second)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageWait, after: time.Minute, fail: "attaching \"" + url + "\": HTTP 404", count: 1, forget: true},
		{name: "second failure backs off longer", want: url,
			status: metal3.DataImageStatus{AttachedImage: attachedAs(url), Error: &metal3.DataImageError{Count: 1}, LastReconciled: ago(time.Second)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageWait, after: 2 * time.Minute, fail: "attaching \"" + url + "\": HTTP 404", count: 2, forget: true},
		{name: "a counted failure is not counted again", want: url,
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{Count: 1, Message: "attaching \"" + url + "\": HTTP 404"}, LastReconciled: ago(20 * time.Second)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageWait, after: 40 * time.Second, count: 1},
		{name: "after the backoff the attach is tried again", want: url,
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{Count: 1, Message: "attaching \"" + url + "\": HTTP 404"}, LastReconciled: ago(2 * time.Minute)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageAttach, count: 1},
		{name: "a failed detach is counted", want: "",
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{}, LastReconciled: ago(time.Second)},
			st:     provisioner.DataImageState{Attached: true, Error: "BMC refused"}, step: dataImageWait, after: time.Minute, fail: "detaching: BMC refused", count: 1},
		{name: "ejected behind our back: attached again", want: url, status: metal3.DataImageStatus{AttachedImage: attachedAs(url)},
			step: dataImageAttach, forget: true},
		{name: "a failure the provisioner remembers from before is not ours: attach", want: url,
			st: provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageAttach},
		{name: "a failure of an image no longer wanted does not hold the new one", want: url,
			status: metal3.DataImageStatus{AttachedImage: attachedAs(old), Error: &metal3.DataImageError{}, LastReconciled: ago(time.Second)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageAttach, forget: true},
		{name: "a URL with a signed query is recognised as the failed one", want: signed,
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{Count: 1, Message: dataimage.Message(attachingMessage(signed, "HTTP 404"))}, LastReconciled: ago(20 * time.Second)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageWait, after: 40 * time.Second, count: 1},
		{name: "a message cleared by the DataImage controller is not an attempt under way", want: url,
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{Count: 2}},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageAttach, count: 2},
		{name: "a new spec.url is tried at once, the old failure not counted for it", want: url,
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{Count: 3, Message: "attaching \"" + old + "\": HTTP 404"}, LastReconciled: ago(time.Second)},
			st:     provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageAttach},
		{name: "a failure of an image no longer wanted does not matter", want: "",
			status: metal3.DataImageStatus{Error: &metal3.DataImageError{}}, st: provisioner.DataImageState{Error: "HTTP 404"}, step: dataImageReady},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decideDataImage(c.want, c.status, c.st, now, backoff)
			if got.step != c.step || got.after != c.after || got.failure != c.fail || got.count != c.count || got.forget != c.forget {
				t.Errorf("got %+v, want step %d after %v failure %q (count %d) forget %v", got, c.step, c.after, c.fail, c.count, c.forget)
			}
		})
	}
}
