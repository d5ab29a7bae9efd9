package imagebuilder

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
)

func cond(st metal3.PreprovisioningImageStatus, t metal3.ImageStatusConditionType) metav1.Condition {
	if c := conditions.Get(st.Conditions, string(t)); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// The conditions as metal3's controller writes them, in the order an image lives through them.
func TestSetters(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var st metal3.PreprovisioningImageStatus
	steps := []struct {
		name      string
		apply     func()
		ready     metav1.ConditionStatus
		readyWhy  string
		readyMsg  string
		errStatus metav1.ConditionStatus
		errWhy    string
		errMsg    string
		hasURL    bool
	}{
		{"waiting, no error yet", func() { SetNotReady(&st, 1, "Waiting", now) },
			"False", metal3.ImageSuccessReason, "Waiting", "False", metal3.ImageSuccessReason, "", false},
		{"built", func() { st.ImageURL = "http://x/a.iso"; SetBuilt(&st, 1, now) },
			"True", metal3.ImageSuccessReason, MessageGenerated, "False", metal3.ImageSuccessReason, "", true},
		{"config changed: not ready, URL kept", func() { SetNotReady(&st, 2, "Config changed", now) },
			"False", metal3.ImageSuccessReason, "Config changed", "False", metal3.ImageSuccessReason, "", true},
		{"failed: URL cleared", func() { SetFailed(&st, 2, metal3.ImageBuildInvalidReason, "bad", now) },
			"False", metal3.ImageBuildInvalidReason, "", "True", metal3.ImageBuildInvalidReason, "bad", false},
		// The failure is over (the Secret exists now, say): a host must not read it as current.
		{"waiting after a failure clears the error", func() { SetNotReady(&st, 2, "Waiting", now) },
			"False", metal3.ImageSuccessReason, "Waiting", "False", metal3.ImageSuccessReason, "", false},
	}
	for _, s := range steps {
		s.apply()
		r, e := cond(st, metal3.ConditionImageReady), cond(st, metal3.ConditionImageError)
		if r.Status != s.ready || r.Reason != s.readyWhy || r.Message != s.readyMsg || e.Status != s.errStatus || e.Reason != s.errWhy || e.Message != s.errMsg {
			t.Errorf("%s: Ready %s/%s/%q Error %s/%s/%q", s.name, r.Status, r.Reason, r.Message, e.Status, e.Reason, e.Message)
		}
		if (st.ImageURL != "") != s.hasURL {
			t.Errorf("%s: url %q", s.name, st.ImageURL)
		}
		if IsReady(st) != (s.ready == "True") {
			t.Errorf("%s: IsReady", s.name)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var st metal3.PreprovisioningImageStatus
	if d := RetryDelay(st, metal3.ConditionImageError, 10*time.Second, 10*time.Minute, start); d != 10*time.Second {
		t.Errorf("without a condition: %v", d)
	}
	SetFailed(&st, 1, metal3.ImageMissingNetworkDataReason, "missing", start)
	for name, tc := range map[string]struct{ since, want time.Duration }{
		"at once":    {0, 10 * time.Second},
		"after 30 s": {30 * time.Second, 40 * time.Second},
		"capped":     {time.Hour, 10 * time.Minute},
	} {
		if got := RetryDelay(st, metal3.ConditionImageError, 10*time.Second, 10*time.Minute, start.Add(tc.since)); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
