package provisioning

import (
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
)

// complete is a stack that has run, reported DeployComplete.
func complete(t *testing.T) *observed {
	t.Helper()
	o := world(&disabled, configv1.BareMetalPlatformType)
	for range 3 {
		o.apply(mustDecide(t, o))
		o.available(render.Metal3Deployment, render.BMODeployment)
	}
	return o
}

// TestDecideResumesPausedDeployment: a Deployment paused by hand (kubectl rollout pause) is
// resumed; paused, it would never roll out what the operator writes.
func TestDecideResumesPausedDeployment(t *testing.T) {
	for _, name := range []string{render.Metal3Deployment, render.BMODeployment} {
		t.Run(name, func(t *testing.T) {
			o := complete(t)
			o.deployments[name].Spec.Paused = true
			p := mustDecide(t, o)
			if got := written(p); !slices.Equal(got, []string{"*v1.Deployment/" + name}) {
				t.Fatalf("writes %q, want the paused Deployment", got)
			}
			if d := p.writes[0].obj.(*appsv1.Deployment); d.Spec.Paused {
				t.Error("the Deployment is written paused")
			}
			o.apply(p)
			if p := mustDecide(t, o); len(p.writes) > 0 {
				t.Errorf("resumed, then writes %q", written(p))
			}
		})
	}
}

// markDown makes a Deployment unavailable for a while after its rollout finished, as the deployment
// controller reports it: Available False since then, Progressing still NewReplicaSetAvailable.
func markDown(o *observed, name string, since time.Duration) {
	d := o.deployments[name]
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable",
				LastTransitionTime: metav1.NewTime(o.now.Add(-since))},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				LastTransitionTime: metav1.NewTime(o.now.Add(-time.Hour))},
		}}
}

// TestDecideUnavailableAfterRollout: a Deployment that goes down after its rollout finished (its
// pod crash-loops) is Degraded once it has been down for the rollout's deadline, not Progressing
// forever; a rollout of the operator's own, or one still under way, is progress.
func TestDecideUnavailableAfterRollout(t *testing.T) {
	for name, tc := range map[string]struct {
		world func(t *testing.T) *observed
		state string
		// message is part of the Degraded message ("" not checked).
		message string
		events  []string
		// degraded, progressing: the ClusterOperator's statuses.
		degraded, progressing configv1.ConditionStatus
	}{
		"down for a minute: not yet reported": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, time.Minute)
				return o
			},
			state: clusteroperator.ReasonSyncing, degraded: configv1.ConditionFalse, progressing: configv1.ConditionTrue,
		},
		"down for five minutes: Degraded, not Progressing": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, 5*time.Minute)
				return o
			},
			state: clusteroperator.ReasonDeploymentCrashLooping, message: "metal3 deployment unavailable for more than 5 minutes",
			events: []string{ReasonDeploymentCrashLooping}, degraded: configv1.ConditionTrue, progressing: configv1.ConditionFalse,
		},
		"both down: named together": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, time.Hour)
				markDown(o, render.BMODeployment, 10*time.Minute)
				return o
			},
			state:   clusteroperator.ReasonDeploymentCrashLooping,
			message: "metal3 and metal3-baremetal-operator deployment unavailable", events: []string{ReasonDeploymentCrashLooping},
			degraded: configv1.ConditionTrue, progressing: configv1.ConditionFalse,
		},
		"reported already: no second event": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, time.Hour)
				o.apply(mustDecide(t, o))
				return o
			},
			state: clusteroperator.ReasonDeploymentCrashLooping, degraded: configv1.ConditionTrue, progressing: configv1.ConditionFalse,
		},
		"down, and the operator rolls it out again: progress": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, time.Hour)
				o.prov.Spec.ExternalIPs = []string{"10.0.0.5"}
				return o
			},
			state: clusteroperator.ReasonSyncing, events: []string{ReasonCertificateIssued, ReasonUpdated},
			degraded: configv1.ConditionFalse, progressing: configv1.ConditionTrue,
		},
		"a rollout under way: progress until its deadline": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, time.Hour)
				o.deployments[render.Metal3Deployment].Status.Conditions[1].Reason = "ReplicaSetUpdated"
				return o
			},
			state: clusteroperator.ReasonSyncing, degraded: configv1.ConditionFalse, progressing: configv1.ConditionTrue,
		},
		"available, but its container keeps crashing after passing readiness: Degraded": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				pod := crashingPod(o.now, 4, 30*time.Second, time.Minute, "")
				pod.Namespace = o.namespace
				o.pods = []corev1.Pod{pod}
				return o
			},
			state:   clusteroperator.ReasonDeploymentCrashLooping,
			message: "metal3 deployment crash-looping (container metal3-ironic of pod metal3-7d9f restarted 4 times)",
			events:  []string{ReasonDeploymentCrashLooping}, degraded: configv1.ConditionTrue, progressing: configv1.ConditionFalse,
		},
		"crash-looping and another down: both named": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.BMODeployment, 10*time.Minute)
				pod := crashingPod(o.now, 4, 30*time.Second, time.Minute, "CrashLoopBackOff")
				pod.Namespace = o.namespace
				o.pods = []corev1.Pod{pod}
				return o
			},
			state: clusteroperator.ReasonDeploymentCrashLooping,
			message: "metal3 deployment crash-looping (container metal3-ironic of pod metal3-7d9f restarted 4 times); " +
				"metal3-baremetal-operator deployment unavailable for more than 5 minutes",
			events: []string{ReasonDeploymentCrashLooping}, degraded: configv1.ConditionTrue, progressing: configv1.ConditionFalse,
		},
		"back up: complete": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := complete(t)
				markDown(o, render.Metal3Deployment, time.Hour)
				o.apply(mustDecide(t, o))
				o.available(render.Metal3Deployment)
				return o
			},
			state: clusteroperator.ReasonDeployComplete, events: []string{ReasonDeployComplete},
			degraded: configv1.ConditionFalse, progressing: configv1.ConditionFalse,
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.world(t)
			p := mustDecide(t, o)
			if p.state.Reason != tc.state || !strings.Contains(p.state.Message, tc.message) {
				t.Errorf("state %q (%s), want %q with %q", p.state.Reason, p.state.Message, tc.state, tc.message)
			}
			if got := reasons(p); !slices.Equal(got, tc.events) {
				t.Errorf("events %q, want %q", got, tc.events)
			}
			if p.requeueAfter == 0 || p.requeueAfter > time.Hour {
				t.Errorf("requeue after %s: want a look again", p.requeueAfter)
			}
			o.apply(p)
			if c := clusteroperator.Condition(o.co, "Degraded"); c == nil || c.Status != tc.degraded {
				t.Errorf("Degraded %+v, want %s", c, tc.degraded)
			}
			if c := clusteroperator.Condition(o.co, "Progressing"); c == nil || c.Status != tc.progressing {
				t.Errorf("Progressing %+v, want %s", c, tc.progressing)
			}
		})
	}
}
