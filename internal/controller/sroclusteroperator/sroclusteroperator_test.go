package sroclusteroperator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
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
	testenv.Main(m, testenv.Options{CRDPaths: []string{co}}, &env)
}

func pv(name, kernel string, ready bool, statuses ...sro.SpecialResourceVerification) sro.PreflightValidation {
	p := sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernel}}
	p.Status.SRStatuses = statuses
	c := conditions.False(sro.ConditionReady, sro.ReasonVerifying, "")
	if ready {
		c = conditions.True(sro.ConditionReady, sro.ReasonVerified, "")
	}
	conditions.Set(&p.Status.Conditions, c, 0, time.Now())
	return p
}

// TestUpgradeable: one row per rule of the Upgradeable condition.
func TestUpgradeable(t *testing.T) {
	building := sro.SpecialResourceVerification{Name: "b", VerificationStatus: sro.VerificationFalse, StatusReason: "building"}
	failed := sro.SpecialResourceVerification{Name: "c", VerificationStatus: sro.VerificationError, StatusReason: "build failed"}
	tests := map[string]struct {
		pvs    []sro.PreflightValidation
		status configv1.ConditionStatus
		reason string
		msg    []string
	}{
		"no upgrade planned":       {status: configv1.ConditionTrue, reason: ReasonAsExpected},
		"verified":                 {pvs: []sro.PreflightValidation{pv("u", "k1", true)}, status: configv1.ConditionTrue, reason: ReasonPreflightSucceeded},
		"a build is running":       {pvs: []sro.PreflightValidation{pv("u", "k1", true), pv("v", "k2", false, building)}, status: configv1.ConditionFalse, reason: ReasonPreflightPending, msg: []string{"kernel k2", "b: building"}},
		"a build failed":           {pvs: []sro.PreflightValidation{pv("v", "k2", false, building), pv("w", "k3", false, failed)}, status: configv1.ConditionFalse, reason: ReasonPreflightFailed, msg: []string{"c: build failed", "b: building"}},
		"not checked yet is false": {pvs: []sro.PreflightValidation{pv("u", "k1", false)}, status: configv1.ConditionFalse, reason: ReasonPreflightPending, msg: []string{"not checked yet"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := upgradeable(tc.pvs)
			if c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("got %s %s %q, want %s %s", c.Status, c.Reason, c.Message, tc.status, tc.reason)
			}
			for _, m := range tc.msg {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
		})
	}
}

// TestDegradedAndProgressing: one row per rule of the Degraded and Progressing conditions.
func TestDegradedAndProgressing(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sr := func(name string, gen, readyGen int64, cond, msg string, since time.Duration) sro.SpecialResource {
		s := sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}}
		s.Status.ReadyGeneration = readyGen
		conditions.Set(&s.Status.Conditions, conditions.True(cond, "R", msg), gen, now.Add(-since))
		return s
	}
	tests := map[string]struct {
		srs                   []sro.SpecialResource
		degraded, progressing configv1.ConditionStatus
		msg                   []string
		recheck               time.Duration
	}{
		"errored a moment":  {srs: []sro.SpecialResource{sr("a", 1, 0, sro.ConditionErrored, "build failed", 4*time.Minute)}, degraded: configv1.ConditionFalse, progressing: configv1.ConditionFalse, recheck: 6 * time.Minute},
		"errored for long":  {srs: []sro.SpecialResource{sr("a", 1, 0, sro.ConditionErrored, "build failed", 11*time.Minute), sr("b", 1, 0, sro.ConditionErrored, "image missing", time.Minute)}, degraded: configv1.ConditionTrue, progressing: configv1.ConditionFalse, msg: []string{"a: build failed"}, recheck: 9 * time.Minute},
		"a rollout":         {srs: []sro.SpecialResource{sr("a", 2, 1, sro.ConditionProgressing, "", time.Minute)}, degraded: configv1.ConditionFalse, progressing: configv1.ConditionTrue},
		"the first install": {srs: []sro.SpecialResource{sr("a", 1, 0, sro.ConditionProgressing, "", time.Minute)}, degraded: configv1.ConditionFalse, progressing: configv1.ConditionTrue},
		"a node rebooting":  {srs: []sro.SpecialResource{sr("a", 2, 2, sro.ConditionProgressing, "", time.Minute)}, degraded: configv1.ConditionFalse, progressing: configv1.ConditionFalse},
		"ready":             {srs: []sro.SpecialResource{sr("a", 2, 2, sro.ConditionReady, "", time.Hour)}, degraded: configv1.ConditionFalse, progressing: configv1.ConditionFalse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, recheck := Conditions(nil, tc.srs, now)
			d, p := find(got, configv1.OperatorDegraded), find(got, configv1.OperatorProgressing)
			if d.Status != tc.degraded || p.Status != tc.progressing || recheck != tc.recheck {
				t.Fatalf("Degraded %s %q, Progressing %s %q, recheck %s; want %s, %s, %s", d.Status, d.Message, p.Status, p.Message, recheck, tc.degraded, tc.progressing, tc.recheck)
			}
			if tc.degraded == configv1.ConditionTrue && d.Reason != ReasonErrored {
				t.Errorf("Degraded reason %s", d.Reason)
			}
			for _, m := range tc.msg {
				if !strings.Contains(d.Message, m) {
					t.Errorf("Degraded message %q lacks %q", d.Message, m)
				}
			}
			if strings.Contains(d.Message, "b: ") {
				t.Errorf("Degraded message %q names b, errored a minute only", d.Message)
			}
		})
	}
}

// TestClusterOperatorWritten: the ClusterOperator is created at start; a condition's time moves
// only when its status changes; conditions of other types stay; Progressing follows the
// SpecialResources.
func TestClusterOperatorWritten(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run(t, &Reconciler{Version: "1.2.3", Namespace: "sro", SkipNameValidation: true, Now: func() time.Time { return clock }})

	co := &configv1.ClusterOperator{}
	poll.Until(t, "ClusterOperator created with conditions", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: DefaultName}, co)
		return err == nil && len(co.Status.Conditions) == 4, fmt.Sprint(err, co.Status.Conditions)
	})
	if co.Status.Versions[0].Version != "1.2.3" || find(co.Status.Conditions, configv1.OperatorAvailable).Status != configv1.ConditionTrue {
		t.Fatalf("status %+v", co.Status)
	}
	started := find(co.Status.Conditions, configv1.OperatorProgressing).LastTransitionTime

	// Someone else's condition type stays.
	co.Status.Conditions = append(co.Status.Conditions, configv1.ClusterOperatorStatusCondition{Type: "EvaluationConditionsDetected", Status: configv1.ConditionFalse, LastTransitionTime: started})
	if err := env.Client.Status().Update(context.Background(), co); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour)
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "co-test"}}
	if err := env.Client.Create(context.Background(), sr); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Client.Delete(context.Background(), sr) }()
	conditions.Set(&sr.Status.Conditions, conditions.True(sro.ConditionProgressing, sro.ReasonHandlingState, "x"), sr.Generation, time.Now())
	if err := env.Client.Status().Update(context.Background(), sr); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "Progressing True", func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: DefaultName}, co); err != nil {
			return false, err.Error()
		}
		p := find(co.Status.Conditions, configv1.OperatorProgressing)
		return p.Status == configv1.ConditionTrue && strings.Contains(p.Message, "co-test"), fmt.Sprintf("%+v", p)
	})
	// must-gather collects the related objects: the driver's namespace is one.
	if !slices.Contains(co.Status.RelatedObjects, configv1.ObjectReference{Resource: "namespaces", Name: "co-test"}) ||
		!slices.Contains(co.Status.RelatedObjects, configv1.ObjectReference{Resource: "namespaces", Name: "sro"}) {
		t.Errorf("related objects %+v: want the operator's namespace and the SpecialResource's (co-test)", co.Status.RelatedObjects)
	}
	if p := find(co.Status.Conditions, configv1.OperatorProgressing); !p.LastTransitionTime.After(started.Time) {
		t.Errorf("Progressing changed but its time did not move")
	}
	if a := find(co.Status.Conditions, configv1.OperatorAvailable); !a.LastTransitionTime.Equal(&started) {
		t.Errorf("Available did not change but its time moved")
	}
	if find(co.Status.Conditions, "EvaluationConditionsDetected") == nil {
		t.Errorf("another writer's condition was dropped")
	}
}

// TestClusterOperatorDeletedIsWrittenAgain: a ClusterOperator deleted by hand (which is neither
// watched nor cached) is created again with its conditions at the next resync.
func TestClusterOperatorDeletedIsWrittenAgain(t *testing.T) {
	r := &Reconciler{Name: "sro-resync", Version: "1.2.3", Resync: 200 * time.Millisecond, SkipNameValidation: true}
	run(t, r)
	co := &configv1.ClusterOperator{}
	written := func() (bool, string) {
		co = &configv1.ClusterOperator{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: r.Name}, co)
		return err == nil && len(co.Status.Conditions) == 4, fmt.Sprint(err, co.Status.Conditions)
	}
	poll.Until(t, "ClusterOperator created with conditions", written)
	first := co.UID
	if err := env.Client.Delete(context.Background(), co); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "ClusterOperator written again after its deletion", func() (bool, string) {
		ok, msg := written()
		return ok && co.UID != first, msg
	})
}

// run starts r in a manager of its own, stopped when the test ends.
func run(t *testing.T, r *Reconciler) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
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
}
