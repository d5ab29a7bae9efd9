package host

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestLiveUpdateSurvivesAFailedStatusWrite: on a host whose power off is disabled the reboot
// annotation itself starts the live update; the API server fails the status write that records it
// (a 500, as an API server restart does). The annotation must still be there for the next
// reconcile, which starts the live update again: removed before that write, the request was lost
// and the host stayed on without its change.
func TestLiveUpdateSurvivesAFailedStatusWrite(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fault := &statusWriteFault{path: "/namespaces/" + ns + "/baremetalhosts/h/status", body: `"operationalStatus":"servicing"`}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(fault.wrap)
	startManager(t, cfg, ns, fix, firmwareControllers(fix))
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot},
		func(b *builder.BareMetalHostBuilder) { b.WithDisablePowerOff() })
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
	servicedOK(t, ns, "h", fix, 1)
	if !fault.fired() {
		t.Fatal("the status write that starts the live update was never failed: the test tested nothing")
	}
	if got := biosValue(t, fix, ns, "h", "ProcTurboMode"); got != "Disabled" {
		t.Fatalf("ProcTurboMode %q after the live update, want Disabled", got)
	}
}

// TestLiveUpdateEndsOnceAfterAFailedStatusWrite: a live update of settings and a firmware update
// completes; the update is recorded in HostFirmwareComponents, then the status write that ends the
// live update fails. The next reconcile, finding the host still servicing, must end it: asked
// again, the request now looked like the settings alone (the update recorded, the settings still
// shown as before), a request never run, and the provisioner serviced the host a second time.
func TestLiveUpdateEndsOnceAfterAFailedStatusWrite(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fault := &statusWriteFault{path: "/namespaces/" + ns + "/baremetalhosts/h/status", body: `"operationalStatus":"OK"`, manual: true}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(fault.wrap)
	op := startManager(t, cfg, ns, fix, firmwareControllers(fix))
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot, FirmwareUpdates: onReboot})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	setUpdates(t, ns, "h", metal3.FirmwareUpdate{Component: "bios", URL: newBIOS})
	fault.arm()
	reboot(t, ns, "h")
	h := servicedOK(t, ns, "h", fix, 1)
	if !fault.fired() {
		t.Fatal("the status write that ends the live update was never failed: the test tested nothing")
	}
	op.waitSeen(t, ns, "h", h.ResourceVersion, 2)
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 {
		t.Fatalf("serviced %d times, want 1", n)
	}
}

// TestEventsSurviveAFailedAnnotationRemoval: the reconcile that takes an available host to
// inspecting for the inspect annotation writes the status, then removes the annotation; the API
// server fails that removal. The state change was written, so its Event must be there too: the
// retry starts from inspecting and has no change to announce.
func TestEventsSurviveAFailedAnnotationRemoval(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
	fault := &statusWriteFault{path: "/namespaces/" + ns + "/baremetalhosts/h", body: `"` + metal3.InspectAnnotationPrefix + `":null`}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(fault.wrap)
	startManager(t, cfg, ns, fix, nil)
	// Another annotation keeps the map: the removal's patch then names the inspect annotation.
	h := newHost(ns, "h").WithAnnotation("example.com/keep", "1").Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	fix.SetLatency(fixture.OpInspect, 300*time.Millisecond)
	annotate(t, ns, "h", metal3.InspectAnnotationPrefix, "")
	waitHost(t, ns, "h", "inspected again, annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.InspectAnnotationPrefix]
		return !ok && h.Status.Provisioning.State == metal3.StateAvailable && fix.Count(ns, "h", fixture.OpInspect) == 2
	})
	if !fault.fired() {
		t.Fatal("the annotation removal was never failed: the test tested nothing")
	}
	poll.Until(t, "the available → inspecting Event", func() (bool, string) {
		got := eventsFor(t, ns, "h", true)
		for _, e := range got {
			if strings.Contains(e, "State changed: available → inspecting") {
				return true, ""
			}
		}
		return false, strings.Join(got, " | ")
	})
}

// statusWriteFault fails, once, the first status write to path whose body contains body, with the
// API server's 500; with manual, only once armed.
type statusWriteFault struct {
	path, body string
	manual     bool
	mu         sync.Mutex
	armed      bool
	done       bool
}

func (f *statusWriteFault) arm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = true
}

func (f *statusWriteFault) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if (req.Method != http.MethodPatch && req.Method != http.MethodPut) || !strings.HasSuffix(req.URL.Path, f.path) || req.Body == nil {
			return rt.RoundTrip(req)
		}
		data, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(data))
		f.mu.Lock()
		fail := !f.done && (!f.manual || f.armed) && bytes.Contains(data, []byte(f.body))
		f.done = f.done || fail
		f.mu.Unlock()
		if !fail {
			return rt.RoundTrip(req)
		}
		return &http.Response{
			StatusCode: http.StatusInternalServerError,
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(
				`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected failure","reason":"InternalError","code":500}`)),
			Request: req,
		}, nil
	})
}

func (f *statusWriteFault) fired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

type roundTripper func(*http.Request) (*http.Response, error)

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return r(req) }
