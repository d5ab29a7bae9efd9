package preflightvalidation

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	configv1 "github.com/openshift/api/config/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/specialresource"
	"github.com/metalforge/metalforge/internal/controller/sroclusteroperator"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	dir, err := testenv.ModuleDir("github.com/openshift/api")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	co := filepath.Join(dir, "config", "v1", "zz_generated.crd-manifests", "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml")
	testenv.Main(m, testenv.Options{CRDPaths: []string{co, "internal/test/crds"}}, &env)
}

const kernelZ = "5.14.0-427.13.1.el9_4.x86_64"

// world is the registry and the operator's preflight and ClusterOperator controllers.
type world struct {
	t        *testing.T
	registry string
	builder  *countingBuilder
}

// countingBuilder counts, per namespace, the builds the controller asked to start and the
// times it asked for a build's state (once per check of a SpecialResource with a source and no
// image).
type countingBuilder struct {
	build.Builder
	mu       sync.Mutex
	starts   map[string]int
	statuses map[string]int
}

func (b *countingBuilder) Start(ctx context.Context, req build.Request) error {
	b.mu.Lock()
	b.starts[req.Namespace]++
	b.mu.Unlock()
	return b.Builder.Start(ctx, req)
}

func (b *countingBuilder) Status(ctx context.Context, namespace, name string) (build.Status, bool, error) {
	b.mu.Lock()
	b.statuses[namespace]++
	b.mu.Unlock()
	return b.Builder.Status(ctx, namespace, name)
}

// counts are the starts and status requests of builds in the namespace.
func (b *countingBuilder) counts(namespace string) (starts, statuses int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts[namespace], b.statuses[namespace]
}

// startWorld starts the controllers with Job builds, or OpenShift builds when openShift.
func startWorld(t *testing.T, openShift ...bool) *world {
	t.Helper()
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	w := &world{t: t, registry: strings.TrimPrefix(reg.URL, "http://")}
	cacheOpts, clientOpts, err := cacheview.Options(nil, specialresource.CacheViews(false)...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Cache: cacheOpts,
		Client: clientOpts, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	var backend build.Builder = build.Job{Client: mgr.GetClient()}
	if len(openShift) > 0 && openShift[0] {
		backend = build.OpenShift{Client: mgr.GetClient()}
	}
	w.builder = &countingBuilder{Builder: backend, starts: map[string]int{}, statuses: map[string]int{}}
	pv := &Reconciler{Builder: w.builder, RetryDelay: 200 * time.Millisecond, SkipNameValidation: true,
		ClusterVersion: func(context.Context) (string, error) { return "4.15.0", nil }}
	if err := pv.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	co := &sroclusteroperator.Reconciler{Version: "test", Namespace: "sro-system", SkipNameValidation: true}
	if err := co.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return w
}

func (w *world) push(repoTag string) {
	w.t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		w.t.Fatal(err)
	}
	ref, err := name.ParseReference(w.registry + "/" + repoTag)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		w.t.Fatal(err)
	}
}

// specialResource creates a SpecialResource (and its namespace, as its controller would);
// change, when given, edits it before.
func (w *world) specialResource(name string, source bool, change ...func(*sro.SpecialResource)) *sro.SpecialResource {
	w.t.Helper()
	ns := env.Namespace(w.t)
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: sro.SpecialResourceSpec{
		Namespace: ns,
		DriverContainer: sro.SpecialResourceDriverContainer{
			Image: w.registry + "/vendor/" + name + ":{{.KernelFullVersion}}", Modules: []string{name},
		},
	}}
	if source {
		sr.Spec.DriverContainer.Source.Git = &sro.GitSource{URI: "https://git.example/" + name + ".git"}
	}
	for _, f := range change {
		f(sr)
	}
	if err := env.Client.Create(context.Background(), sr); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sr) })
	return sr
}

func (w *world) clusterOperator() *configv1.ClusterOperator {
	w.t.Helper()
	co := &configv1.ClusterOperator{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: sroclusteroperator.DefaultName}, co); err != nil {
		return nil
	}
	return co
}

func upgradeable(co *configv1.ClusterOperator) *configv1.ClusterOperatorStatusCondition {
	if co == nil {
		return nil
	}
	for i := range co.Status.Conditions {
		if co.Status.Conditions[i].Type == configv1.OperatorUpgradeable {
			return &co.Status.Conditions[i]
		}
	}
	return nil
}

// waitUpgradeable waits for the ClusterOperator's Upgradeable condition, with a message naming
// every one of names (the first reports say "not checked yet").
func (w *world) waitUpgradeable(status configv1.ConditionStatus, reason string, names ...string) *configv1.ClusterOperatorStatusCondition {
	w.t.Helper()
	var c *configv1.ClusterOperatorStatusCondition
	poll.Until(w.t, fmt.Sprintf("Upgradeable %s %s %v", status, reason, names), func() (bool, string) {
		c = upgradeable(w.clusterOperator())
		if c == nil || c.Status != status || c.Reason != reason {
			return false, fmt.Sprintf("%+v", c)
		}
		for _, n := range names {
			if !strings.Contains(c.Message, n) {
				return false, c.Message
			}
		}
		return true, ""
	})
	return c
}

func (w *world) buildJobs(ns string) []batchv1.Job {
	w.t.Helper()
	var list batchv1.JobList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns), client.HasLabels{build.BuildLabel}); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

func finishJob(t *testing.T, job batchv1.Job, ok bool) {
	t.Helper()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cur := &batchv1.Job{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&job), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.StartTime = &now
	last, first := batchv1.JobComplete, batchv1.JobSuccessCriteriaMet
	if ok {
		cur.Status.Succeeded, cur.Status.CompletionTime = 1, &now
	} else {
		cur.Status.Failed = 2
		last, first = batchv1.JobFailed, batchv1.JobFailureTarget
	}
	cur.Status.Conditions = []batchv1.JobCondition{
		{Type: first, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "the kernel headers were not found", LastTransitionTime: now, LastProbeTime: now},
		{Type: last, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "the kernel headers were not found", LastTransitionTime: now, LastProbeTime: now},
	}
	if err := env.Client.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

func getPV(t *testing.T, name string) *sro.PreflightValidation {
	t.Helper()
	pv := &sro.PreflightValidation{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, pv); err != nil {
		t.Fatal(err)
	}
	return pv
}

func verification(pv *sro.PreflightValidation, sr string) sro.SpecialResourceVerification {
	for _, s := range pv.Status.SRStatuses {
		if s.Name == sr {
			return s
		}
	}
	return sro.SpecialResourceVerification{}
}

// TestUpgradeableFalseThenTrue: with no PreflightValidation the operator is Upgradeable. A
// PreflightValidation for kernel Z: SpecialResource a has Z's image (True), b has not but has a
// source (a build starts; False): Upgradeable=False naming b. When b's build pushed its image,
// b is True, the PreflightValidation Ready, and Upgradeable=True; the finished build is removed.
func TestUpgradeableFalseThenTrue(t *testing.T) {
	w := startWorld(t)
	w.waitUpgradeable(configv1.ConditionTrue, sroclusteroperator.ReasonAsExpected)
	a := w.specialResource("a", false)
	b := w.specialResource("b", true)
	w.push("vendor/a:" + kernelZ)

	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + a.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	c := w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightPending, b.Name)
	if !strings.Contains(c.Message, kernelZ) || strings.Contains(c.Message, a.Name+":") {
		t.Fatalf("Upgradeable message %q: want b and the kernel, not a", c.Message)
	}
	got := getPV(t, pv.Name)
	if v := verification(got, a.Name); v.VerificationStatus != sro.VerificationTrue || v.Image != w.registry+"/vendor/a:"+kernelZ {
		t.Fatalf("a: %+v", v)
	}
	if v := verification(got, b.Name); v.VerificationStatus != sro.VerificationFalse || !strings.Contains(v.StatusReason, "building") {
		t.Fatalf("b: %+v", v)
	}
	var jobs []batchv1.Job
	poll.Until(t, "one build for b", func() (bool, string) {
		jobs = w.buildJobs(b.Spec.Namespace)
		return len(jobs) == 1, fmt.Sprint(len(jobs))
	})
	if jobs[0].Annotations[sro.KernelAnnotation] != kernelZ {
		t.Fatalf("build for kernel %q", jobs[0].Annotations[sro.KernelAnnotation])
	}

	w.push("vendor/b:" + kernelZ)
	finishJob(t, jobs[0], true)
	w.waitUpgradeable(configv1.ConditionTrue, sroclusteroperator.ReasonPreflightSucceeded)
	got = getPV(t, pv.Name)
	if v := verification(got, b.Name); v.VerificationStatus != sro.VerificationTrue {
		t.Fatalf("b after its build: %+v", v)
	}
	poll.Until(t, "the finished build removed", func() (bool, string) {
		jobs := w.buildJobs(b.Spec.Namespace)
		return len(jobs) == 0 || !jobs[0].DeletionTimestamp.IsZero(), ""
	})
}

// TestPreflightClusterVersionTemplate: a driver image that depends on the cluster version is not
// verified with the current version (the upgrade renders the new kernel with its own): Unknown,
// naming spec.clusterVersion, even with the current version's image in the registry, and when
// only the upgrade's version renders another image; with
// spec.clusterVersion, the upgrade's image is checked.
func TestPreflightClusterVersionTemplate(t *testing.T) {
	w := startWorld(t)
	sr := w.specialResource("cv", false, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.Image = w.registry + "/vendor/cv:{{.ClusterVersionMajorMinor}}-{{.KernelFullVersion}}"
	})
	// The cluster version in what the driver runs with only: the image and its build do not
	// depend on it, so the check stands.
	runArgs := w.specialResource("runargs", false, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.RunArgs = []sro.RunArg{{Name: "OCP", Value: "{{.ClusterVersion}}"}}
	})
	// Keyed on the upgrade's version only: the current version and any made-up one render the
	// same image, which the registry has; 4.16 would not.
	keyed := w.specialResource("keyed", false, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.Image = w.registry + `/vendor/keyed:{{ if eq .ClusterVersionMajorMinor "4.16" }}416-{{ end }}{{.KernelFullVersion}}`
	})
	w.push("vendor/keyed:" + kernelZ)
	// The cluster version only in the image of another kernel's mapping: not the upgrade's.
	otherMapping := w.specialResource("othermapping", false, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.Image = w.registry + "/vendor/othermapping:{{.KernelFullVersion}}"
		sr.Spec.DriverContainer.KernelMappings = []sro.KernelMapping{{Literal: "4.18.0-305.el8.x86_64", Image: w.registry + "/vendor/legacy:{{.ClusterVersion}}"}}
	})
	w.push("vendor/othermapping:" + kernelZ)
	w.push("vendor/runargs:" + kernelZ)
	w.push("vendor/cv:4.15-" + kernelZ) // the current version's: not what the upgrade will run
	w.push("vendor/cv:4.16-" + kernelZ)
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + sr.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	var v, r sro.SpecialResourceVerification
	poll.Until(t, "cv and runargs judged", func() (bool, string) {
		got := getPV(t, pv.Name)
		v, r = verification(got, sr.Name), verification(got, runArgs.Name)
		return v.StatusReason != "" && r.StatusReason != "", fmt.Sprintf("%+v %+v", v, r)
	})
	if v.VerificationStatus != sro.VerificationUnknown || !strings.HasPrefix(v.StatusReason, "spec.clusterVersion: ") {
		t.Fatalf("without spec.clusterVersion: %+v; want Unknown naming spec.clusterVersion", v)
	}
	if r.VerificationStatus != sro.VerificationTrue {
		t.Fatalf("the cluster version in run arguments only: %+v; want True", r)
	}
	if k := verification(getPV(t, pv.Name), keyed.Name); k.VerificationStatus != sro.VerificationUnknown || !strings.HasPrefix(k.StatusReason, "spec.clusterVersion: ") {
		t.Fatalf("an image keyed on the upgrade's version, without spec.clusterVersion: %+v; want Unknown naming spec.clusterVersion", k)
	}
	poll.Until(t, "othermapping judged", func() (bool, string) {
		o := verification(getPV(t, pv.Name), otherMapping.Name)
		return o.VerificationStatus == sro.VerificationTrue, fmt.Sprintf("%+v", o)
	})

	got := getPV(t, pv.Name)
	got.Spec.ClusterVersion = "4.16.1"
	if err := env.Client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "cv verified with the upgrade's version", func() (bool, string) {
		v = verification(getPV(t, pv.Name), sr.Name)
		return v.VerificationStatus == sro.VerificationTrue, fmt.Sprintf("%+v", v)
	})
	if want := w.registry + "/vendor/cv:4.16-" + kernelZ; v.Image != want {
		t.Fatalf("image %s, want %s", v.Image, want)
	}
}

// TestPreflightFailedBuild: a failed build makes the SpecialResource's check Error and the
// ClusterOperator Upgradeable=False with PreflightValidationFailed and the build's reason; a
// SpecialResource with no image and no source is False.
func TestPreflightFailedBuild(t *testing.T) {
	w := startWorld(t)
	c := w.specialResource("c", true)
	d := w.specialResource("d", false)
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + c.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	var jobs []batchv1.Job
	poll.Until(t, "one build for c", func() (bool, string) { jobs = w.buildJobs(c.Spec.Namespace); return len(jobs) == 1, "" })
	finishJob(t, jobs[0], false)
	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightFailed, "the kernel headers were not found")
	got := getPV(t, pv.Name)
	if v := verification(got, c.Name); v.VerificationStatus != sro.VerificationError {
		t.Fatalf("c: %+v", v)
	}
	if v := verification(got, d.Name); v.VerificationStatus != sro.VerificationFalse || !strings.Contains(v.StatusReason, "nothing to build it from") {
		t.Fatalf("d: %+v", v)
	}
}

// TestPreflightBuildPushedNotShownYet: a build that succeeded while the registry does not show
// its image yet (a mirror catching up) leaves the check False, the upgrade pending rather than
// failed, as the SpecialResource controller waits for such an image; once the image shows, True.
func TestPreflightBuildPushedNotShownYet(t *testing.T) {
	w := startWorld(t)
	e := w.specialResource("e", true)
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + e.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	var jobs []batchv1.Job
	poll.Until(t, "one build for e", func() (bool, string) { jobs = w.buildJobs(e.Spec.Namespace); return len(jobs) == 1, "" })
	finishJob(t, jobs[0], true)
	poll.Until(t, "e False: the image not shown yet", func() (bool, string) {
		v := verification(getPV(t, pv.Name), e.Name)
		return v.VerificationStatus == sro.VerificationFalse && strings.Contains(v.StatusReason, "does not show"), fmt.Sprintf("%+v", v)
	})
	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightPending, e.Name)

	w.push("vendor/e:" + kernelZ)
	w.waitUpgradeable(configv1.ConditionTrue, sroclusteroperator.ReasonPreflightSucceeded)
}

// TestPreflightBuildThatCannotStart: the API server refuses the build of one SpecialResource (its
// namespace does not exist). That check is an Error naming the build's namespace, the others are
// still checked and written, and the upgrade is blocked as failed; once the namespace exists, the
// build starts at the next look.
func TestPreflightBuildThatCannotStart(t *testing.T) {
	w := startWorld(t)
	a := w.specialResource("a", false)
	w.push("vendor/a:" + kernelZ)
	missing := env.Namespace(t) + "-missing"
	b := w.specialResource("b", true, func(sr *sro.SpecialResource) { sr.Spec.Namespace = missing })
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + a.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })

	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightFailed, b.Name)
	poll.Until(t, "b an Error naming its namespace, a checked", func() (bool, string) {
		got := getPV(t, pv.Name)
		vb, va := verification(got, b.Name), verification(got, a.Name)
		return vb.VerificationStatus == sro.VerificationError && strings.Contains(vb.StatusReason, "cannot start") &&
			strings.Contains(vb.StatusReason, missing) && va.VerificationStatus == sro.VerificationTrue, fmt.Sprintf("a %+v, b %+v", va, vb)
	})

	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: missing}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: missing}})
	})
	poll.Until(t, "b building once its namespace exists", func() (bool, string) {
		v := verification(getPV(t, pv.Name), b.Name)
		return v.VerificationStatus == sro.VerificationFalse && len(w.buildJobs(missing)) == 1, fmt.Sprintf("%+v", v)
	})
}
