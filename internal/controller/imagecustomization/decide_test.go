package imagecustomization

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
)

func TestWaitFor(t *testing.T) {
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ppi := func(labels, annotations map[string]string) *metal3.PreprovisioningImage {
		return &metal3.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created), Labels: labels, Annotations: annotations}}
	}
	infra := map[string]string{metal3.InfraEnvLabel: "env1"}
	override := map[string]string{metal3.IgnitionOverrideURIAnnotation: "http://x/y.ign"}
	tests := map[string]struct {
		ppi       *metal3.PreprovisioningImage
		now       time.Time
		wantMsg   string
		wantAfter time.Duration
	}{
		"within the grace period":           {ppi(nil, nil), created.Add(20 * time.Second), "Waiting 1m0s after creation before building the image (until 2025-06-01T12:01:00Z)", 40 * time.Second},
		"grace over":                        {ppi(nil, nil), created.Add(60 * time.Second), "", 0},
		"infraenv without override":         {ppi(infra, nil), created.Add(time.Hour), "Waiting for the baremetal.openshift.io/ignition-override-uri annotation (InfraEnv env1)", 0},
		"infraenv with override":            {ppi(infra, override), created.Add(time.Hour), "", 0},
		"infraenv within grace waits grace": {ppi(infra, override), created, "Waiting 1m0s after creation before building the image (until 2025-06-01T12:01:00Z)", time.Minute},
		"infraenv with empty override":      {ppi(infra, map[string]string{metal3.IgnitionOverrideURIAnnotation: ""}), created.Add(time.Hour), "Waiting for the baremetal.openshift.io/ignition-override-uri annotation (InfraEnv env1)", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			msg, after := waitFor(tc.ppi, time.Minute, tc.now)
			if msg != tc.wantMsg || after != tc.wantAfter {
				t.Errorf("got %q, %v; want %q, %v", msg, after, tc.wantMsg, tc.wantAfter)
			}
		})
	}
}

func TestPickFormat(t *testing.T) {
	iso, initrd := metal3.ImageFormatISO, metal3.ImageFormatInitRD
	tests := map[string]struct {
		accept, builds []metal3.ImageFormat
		want           metal3.ImageFormat
	}{
		"first accepted that is built": {[]metal3.ImageFormat{initrd, iso}, []metal3.ImageFormat{iso, initrd}, initrd},
		"skips what is not built":      {[]metal3.ImageFormat{initrd, iso}, []metal3.ImageFormat{iso}, iso},
		"none":                         {[]metal3.ImageFormat{initrd}, []metal3.ImageFormat{iso}, ""},
		"nothing accepted":             {nil, []metal3.ImageFormat{iso}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := pickFormat(tc.accept, tc.builds); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStatusSetters(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ppi := &metal3.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	ppi.Status.ImageURL = "http://old"
	setError(ppi, metal3.ImageBuildInvalidReason, "nmstate: interfaces[0].type:\n  bad", now)
	ready, errc := cond(ppi, readyType), cond(ppi, errorType)
	if ppi.Status.ImageURL != "" || ready.Status != "False" || ready.Reason != metal3.ImageBuildInvalidReason || ready.Message != "" ||
		errc.Status != "True" || errc.Message != "nmstate: interfaces[0].type: bad" || errc.ObservedGeneration != 3 {
		t.Errorf("setError: %+v %+v url %q", ready, errc, ppi.Status.ImageURL)
	}
	setUnready(ppi, msgConfigChanged, now)
	if r := cond(ppi, readyType); r.Status != "False" || r.Reason != metal3.ImageSuccessReason || r.Message != msgConfigChanged {
		t.Errorf("setUnready: %+v", r)
	}
	if long := sanitize(strings.Repeat("é", 2000)); len(long) > maxMessage+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("sanitize did not bound the message (%d bytes)", len(long))
	}
}

func cond(ppi *metal3.PreprovisioningImage, t string) metav1.Condition {
	for _, c := range ppi.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// The first retry of a failure comes MinRetryDelay after it, however long the image was Ready
// before: the delay grows with the time the failure (or the wait) has lasted, not the time since
// the conditions last changed before it.
func TestFirstRetryAfterTheMinimum(t *testing.T) {
	b := testBuilder(t)
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer unavailable.Close()
	builtAt := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now := builtAt.Add(48 * time.Hour)
	cfg := DefaultConfig()
	tests := map[string]struct {
		edit    func(p *metal3.PreprovisioningImage)
		missing bool
		reason  string // of the Error condition, "" for a wait (Error False)
	}{
		"network data Secret deleted": {func(p *metal3.PreprovisioningImage) { p.Spec.NetworkDataName = "gone" }, true, metal3.ImageMissingNetworkDataReason},
		"override unreachable": {func(p *metal3.PreprovisioningImage) {
			p.Annotations = map[string]string{metal3.IgnitionOverrideURIAnnotation: unavailable.URL + "/agent.ign"}
		}, false, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newPPI("ns", "host-0")
			p.UID, p.Generation = "uid-0", 1
			p.Status.ImageURL = "http://192.0.2.1:8084/old.iso"
			setImage(p, p.Status.ImageURL, &imagestore.Record{}, metal3.ImageFormatISO, metal3.SecretStatus{}, builtAt)
			tc.edit(p)
			s := &scope{ctx: context.Background(), cfg: &cfg, b: b, ppi: p, now: now, missing: tc.missing}
			out := s.run()
			if out.err != nil || out.after != cfg.MinRetryDelay {
				t.Errorf("outcome %+v, want a retry after %v", out, cfg.MinRetryDelay)
			}
			if e := cond(p, errorType); (e.Status == metav1.ConditionTrue) != (tc.reason != "") || (tc.reason != "" && e.Reason != tc.reason) {
				t.Errorf("Error condition %+v, want reason %q", e, tc.reason)
			}
			// The same failure a minute later: the delay grows.
			s = &scope{ctx: context.Background(), cfg: &cfg, b: b, ppi: p, now: now.Add(time.Minute), missing: tc.missing}
			if out := s.run(); out.after != time.Minute+cfg.MinRetryDelay {
				t.Errorf("a minute on: retry after %v, want %v", out.after, time.Minute+cfg.MinRetryDelay)
			}
		})
	}
}

// An InfraEnv image that waited an hour for its override annotation, whose override is then not
// served yet: the first retry comes MinRetryDelay after the failures began, not MaxRetryDelay
// (Ready was False with the same reason for the whole wait), and the delay grows from there.
func TestOverrideRetryAfterLongWait(t *testing.T) {
	b := testBuilder(t)
	notYet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }))
	defer notYet.Close()
	cfg := DefaultConfig()
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	p := newPPI("ns", "ztp-0")
	p.UID, p.Generation, p.CreationTimestamp = "uid-0", 1, metav1.NewTime(created)
	p.Labels = map[string]string{metal3.InfraEnvLabel: "env1"}
	run := func(at time.Duration) outcome {
		return (&scope{ctx: context.Background(), cfg: &cfg, b: b, ppi: p, now: created.Add(at)}).run()
	}
	run(61 * time.Second) // waiting for the annotation: Ready False from here
	p.Annotations = map[string]string{metal3.IgnitionOverrideURIAnnotation: notYet.URL + "/discovery.ign"}
	for _, step := range []struct{ at, want time.Duration }{
		{time.Hour, cfg.MinRetryDelay},
		{time.Hour + time.Minute, time.Minute + cfg.MinRetryDelay},
	} {
		if out := run(step.at); out.err != nil || out.after != step.want {
			t.Errorf("%v after creation: outcome %+v, want a retry after %v", step.at, out, step.want)
		}
	}
	r, e := cond(p, readyType), cond(p, errorType)
	if r.Status != metav1.ConditionFalse || r.Reason != metal3.ImageSuccessReason || !strings.HasPrefix(r.Message, msgOverrideWait) ||
		!strings.Contains(r.Message, "HTTP 404") || e.Status != metav1.ConditionFalse {
		t.Errorf("conditions %+v %+v, want metal3's wait (Ready False ImageSuccess, Error False)", r, e)
	}
}

// testBuilder builds images over the test base images, published under 192.0.2.1.
// TestBuildErrorAfterCacheLossClearsReady: an image whose cache was lost and whose rebuild fails
// with an error of the server's own (here: nmcli missing) is retried with backoff, and meanwhile is
// not Ready with the URL that answers 404 (it stayed Ready, seen only in the logs).
func TestBuildErrorAfterCacheLossClearsReady(t *testing.T) {
	catalog, err := baseimage.Load(basePaths(t))
	must(t, err)
	store, err := imagestore.Open(t.TempDir())
	must(t, err)
	b, err := imagebuild.New(imagebuild.Config{Catalog: catalog, Store: store, PublishURL: "http://192.0.2.1:8084", Log: testr.New(t),
		Agent: testAgent, NMState: nmstate.Generator{NMCLI: filepath.Join(t.TempDir(), "no-nmcli")}})
	must(t, err)
	cfg := DefaultConfig()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	p := newPPI("ns", "host-0")
	p.UID, p.Generation = "uid-0", 1
	p.Spec.NetworkDataName = "nd"
	setImage(p, "http://192.0.2.1:8084/uid-0-lost.iso", &imagestore.Record{}, metal3.ImageFormatISO, metal3.SecretStatus{Name: "nd", Version: "1"}, now.Add(-time.Hour))
	s := &scope{ctx: context.Background(), cfg: &cfg, b: b, ppi: p, now: now, secret: networkSecret("ns", "nd", staticNMState)}
	out := s.run()
	if out.err == nil {
		t.Fatalf("outcome %+v, want the build error (retried with backoff)", out)
	}
	if r := cond(p, readyType); r.Status != metav1.ConditionFalse || r.Message != msgCacheLost {
		t.Errorf("Ready %s %q, want False %q", r.Status, r.Message, msgCacheLost)
	}
	if !slices.ContainsFunc(s.events, func(e events.Event) bool { return e.Reason == EventImageCacheLost }) {
		t.Errorf("events %+v, want %s", s.events, EventImageCacheLost)
	}
}

func testBuilder(t *testing.T) *imagebuild.Builder {
	t.Helper()
	catalog, err := baseimage.Load(basePaths(t))
	must(t, err)
	store, err := imagestore.Open(t.TempDir())
	must(t, err)
	b, err := imagebuild.New(imagebuild.Config{Catalog: catalog, Store: store, PublishURL: "http://192.0.2.1:8084", Log: testr.New(t),
		Agent: testAgent})
	must(t, err)
	return b
}
