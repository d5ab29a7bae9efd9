package imagecustomization

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// nmcliBuilder builds images with the nmcli program nmcli (one that is not there, or a stub).
func nmcliBuilder(t *testing.T, nmcli string) *imagebuild.Builder {
	t.Helper()
	catalog, err := baseimage.Load(basePaths(t))
	must(t, err)
	store, err := imagestore.Open(t.TempDir())
	must(t, err)
	b, err := imagebuild.New(imagebuild.Config{Catalog: catalog, Store: store, PublishURL: "http://192.0.2.1:8084", Log: testr.New(t),
		Agent: testAgent, NMState: nmstate.Generator{NMCLI: nmcli}})
	must(t, err)
	return b
}

// An image that is not Ready and whose build fails with an error of the controller's own says so
// in Ready (it said it waited for the grace period, for as long as every build failed), the error
// cleaned for status, Error False (the input is fine). Retries of the same failure, whose error
// differs only in a temporary directory's random digits, leave the status as it is (no write); a
// failure with another cause is shown.
func TestBuildErrorWhileNotReadyShown(t *testing.T) {
	cfg := DefaultConfig()
	created := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	p := newPPI("ns", "host-0")
	p.UID, p.Generation, p.CreationTimestamp = "uid-0", 1, metav1.NewTime(created)
	p.Spec.NetworkDataName = "nd"
	secret := networkSecret("ns", "nd", staticNMState)
	run := func(b *imagebuild.Builder, at time.Duration) outcome {
		return (&scope{ctx: context.Background(), cfg: &cfg, b: b, ppi: p, now: created.Add(at), secret: secret}).run()
	}
	missing := nmcliBuilder(t, filepath.Join(t.TempDir(), "no-nmcli"))
	if out := run(missing, 10*time.Second); out.err != nil || !strings.HasPrefix(cond(p, readyType).Message, "Waiting 1m0s after creation") {
		t.Fatalf("within the grace period: outcome %+v, Ready %+v", out, cond(p, readyType))
	}

	out := run(missing, 2*time.Minute)
	if out.err == nil {
		t.Fatalf("outcome %+v, want the build error (retried with backoff)", out)
	}
	r, e := cond(p, readyType), cond(p, errorType)
	if r.Status != metav1.ConditionFalse || r.Reason != metal3.ImageSuccessReason || !strings.HasPrefix(r.Message, msgBuildFailed) ||
		!strings.Contains(r.Message, "nmcli not found") || e.Status != metav1.ConditionFalse || p.Status.ImageURL != "" {
		t.Fatalf("conditions %+v %+v, want Ready False saying the build fails and Error False", r, e)
	}

	// The same failure again, its error naming another temporary directory: nothing changes.
	before := p.Status.DeepCopy()
	again := nmcliBuilder(t, filepath.Join(t.TempDir(), "no-nmcli"))
	if out := run(again, 3*time.Minute); out.err == nil || !strings.Contains(out.err.Error(), "no-nmcli") {
		t.Fatalf("outcome %+v, want the build error", out)
	}
	if !reflect.DeepEqual(*before, p.Status) {
		t.Errorf("a retry of the same failure changed the status (a write per retry):\n%+v\nwant\n%+v", p.Status, *before)
	}

	// Another cause: shown, with the credentials it quotes removed.
	stub := filepath.Join(t.TempDir(), "nmcli")
	must(t, os.WriteFile(stub, []byte("#!/bin/sh\necho 'Error: cannot reach http://user:S3cret@proxy.example:3128' >&2; exit 1\n"), 0o755))
	if out := run(nmcliBuilder(t, stub), 4*time.Minute); out.err == nil {
		t.Fatalf("outcome %+v, want the build error", out)
	}
	if m := cond(p, readyType).Message; !strings.HasPrefix(m, msgBuildFailed) || !strings.Contains(m, "cannot reach http://***@proxy.example:3128") ||
		strings.Contains(m, "S3cret") {
		t.Errorf("Ready message %q, want the new cause without its credentials", m)
	}
}

// With the real API server: an image whose build keeps failing has its status written once, while
// the controller retries with backoff.
func TestBuildErrorWrittenOnce(t *testing.T) {
	ns := env.Namespace(t)
	missing := filepath.Join(t.TempDir(), "no-nmcli")
	c := startICCWith(t, ns, []func(*imagebuild.Config){func(bc *imagebuild.Config) { bc.NMState = nmstate.Generator{NMCLI: missing} }},
		func(cfg *Config) { cfg.GracePeriod = time.Second })
	h := watchPPIs(t, ns)
	ppi := newPPI(ns, "host-0")
	ppi.Spec.NetworkDataName = "nd"
	create(t, networkSecret(ns, "nd", staticNMState), ppi)
	p := waitPPI(t, ns, "host-0", "the build failure", func(p *metal3.PreprovisioningImage) bool {
		return strings.HasPrefix(cond(p, readyType).Message, msgBuildFailed)
	})
	if e := cond(p, errorType); e.Status != metav1.ConditionFalse {
		t.Errorf("Error %+v, want False (an error of the controller's own)", e)
	}
	// Several retries that started from the status written.
	rv, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
	key := types.NamespacedName{Namespace: ns, Name: "host-0"}
	poll.Until(t, "retries of the failed build", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, v := range c.seen[key] {
			if v >= rv {
				n++
			}
		}
		return n >= 4, strconv.Itoa(n) + " retries"
	})
	if now := get(t, ns, "host-0"); now.ResourceVersion != p.ResourceVersion {
		t.Errorf("retries wrote the object: resourceVersion %s, then %s (%s)", p.ResourceVersion, now.ResourceVersion, describe(now))
	}
	poll.Until(t, "the watch to report the failure's version", func() (bool, string) {
		for _, v := range h.of("host-0") {
			if v.ResourceVersion == p.ResourceVersion {
				return true, ""
			}
		}
		return false, "not yet"
	})
	failed := 0
	for _, v := range h.of("host-0") {
		if strings.HasPrefix(cond(v, readyType).Message, msgBuildFailed) {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d versions say the build failed, want 1", failed)
	}
}
