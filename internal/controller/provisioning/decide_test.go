package provisioning

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// world is an observed cluster for the pure decision tests; apply stores a plan's writes in it
// as the API server would (with a generation for Deployments).
func world(spec *metal3.ProvisioningSpec, p configv1.PlatformType) *observed {
	infra := &configv1.Infrastructure{}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: p}
	o := &observed{now: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC), namespace: "openshift-machine-api", release: "4.22.0",
		resync: time.Hour, retry: time.Minute, serveWebhook: true, features: platform.Of(infra), co: clusteroperator.New(),
		secrets: map[string]*corev1.Secret{}, deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		webhookConfigs: map[string]*admissionv1.ValidatingWebhookConfiguration{}}
	o.images, _ = render.ParseImages("test", []byte(testImages))
	if spec != nil {
		o.prov = &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName, UID: "u1", Generation: 1,
			Finalizers: []string{metal3.ProvisioningFinalizer}}, Spec: *spec}
	}
	return o
}

func (o *observed) apply(p *plan) {
	for _, s := range p.secretWrites {
		o.secrets[s.Name] = s
	}
	for _, w := range p.writes {
		switch obj := w.obj.(type) {
		case *appsv1.Deployment:
			obj.Generation++
			o.deployments[obj.Name] = obj
		case *corev1.Service:
			o.services[obj.Name] = obj
		case *admissionv1.ValidatingWebhookConfiguration:
			o.webhookConfigs[obj.Name] = obj
		case *corev1.Secret:
			o.secrets[obj.Name] = obj
		}
		w.obj.SetResourceVersion("1")
	}
	for _, obj := range p.deletes {
		switch obj.(type) {
		case *appsv1.Deployment:
			delete(o.deployments, obj.GetName())
		case *corev1.Service:
			delete(o.services, obj.GetName())
		case *corev1.Secret:
			delete(o.secrets, obj.GetName())
		case *admissionv1.ValidatingWebhookConfiguration:
			delete(o.webhookConfigs, obj.GetName())
		}
	}
	clusteroperator.Apply(o.co, p.state, o.release, nil, o.now)
}

func (o *observed) available(names ...string) {
	for _, n := range names {
		d := o.deployments[n]
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, UpdatedReplicas: 1, AvailableReplicas: 1}
	}
}

func mustDecide(t *testing.T, o *observed) *plan {
	t.Helper()
	p, err := decide(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func written(p *plan) []string {
	var out []string
	for _, s := range p.secretWrites {
		out = append(out, "Secret/"+s.Name)
	}
	for _, w := range p.writes {
		out = append(out, fmt.Sprintf("%T/%s", w.obj, w.obj.GetName()))
	}
	return out
}

func reasons(p *plan) []string {
	var out []string
	for _, e := range p.events {
		out = append(out, e.Reason)
	}
	return out
}

// TestDecide: named situations, from an empty cluster to a complete stack and its failures.
func TestDecide(t *testing.T) {
	for name, tc := range map[string]struct {
		world func(t *testing.T) *observed
		state string
		// writes are the planned writes (Secrets first, then objects: Secret/name, *T/name), in
		// order; nil: none.
		writes  []string
		deletes []string
		events  []string
		requeue time.Duration
	}{
		"unsupported platform: nothing, no requeue": {
			world: func(*testing.T) *observed { return world(&managedSpec, configv1.NutanixPlatformType) },
			state: clusteroperator.ReasonUnsupportedPlatform,
		},
		"no Provisioning object: the operator's webhook only": {
			world:   func(*testing.T) *observed { return world(nil, configv1.BareMetalPlatformType) },
			state:   clusteroperator.ReasonWaitingForProvisioningCR,
			writes:  []string{"Secret/" + secrets.CBOWebhookCert, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig},
			events:  []string{ReasonCertificateIssued, ReasonCreated},
			requeue: time.Hour,
		},
		"a new Provisioning object: the stack, without the baremetal-operator's webhook": {
			world: func(*testing.T) *observed { return world(&disabled, configv1.BareMetalPlatformType) },
			state: clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "Secret/" + secrets.IronicCredentials, "Secret/" + secrets.IronicTLS,
				"Secret/" + secrets.BMOWebhookCert, "Secret/" + AppliedSpecSecret, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig, "*v1.Deployment/metal3", "*v1.Service/metal3-state", "*v1.Deployment/metal3-baremetal-operator", "*v1.Service/baremetal-operator-webhook-service"},
			events:  []string{ReasonCertificateIssued, ReasonCreated, ReasonSecretGenerated, ReasonCertificateIssued, ReasonCertificateIssued, ReasonCreated, ReasonCreated, ReasonCreated, ReasonCreated},
			requeue: 30 * time.Second,
		},
		"applied, not yet running": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				o.apply(mustDecide(t, o))
				return o
			},
			state: clusteroperator.ReasonSyncing, requeue: 30 * time.Second,
		},
		"the baremetal-operator runs: its webhook is configured": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				o.apply(mustDecide(t, o))
				o.available(render.Metal3Deployment, render.BMODeployment)
				return o
			},
			state: clusteroperator.ReasonSyncing, writes: []string{"*v1.ValidatingWebhookConfiguration/" + render.BMOWebhookConfig},
			events: []string{ReasonCreated}, requeue: 30 * time.Second,
		},
		"complete: nothing to write": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				o.apply(mustDecide(t, o))
				o.available(render.Metal3Deployment, render.BMODeployment)
				o.apply(mustDecide(t, o))
				o.co = clusteroperator.New()
				return o
			},
			state: clusteroperator.ReasonDeployComplete, events: []string{ReasonDeployComplete}, requeue: time.Hour,
		},
		"complete, reported: no event either": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				for range 3 {
					o.apply(mustDecide(t, o))
					o.available(render.Metal3Deployment, render.BMODeployment)
				}
				return o
			},
			state: clusteroperator.ReasonDeployComplete, requeue: time.Hour,
		},
		"the provisioning IP among the external IPs: the certificate is kept": {
			world: func(t *testing.T) *observed {
				t.Helper()
				spec := disabled
				spec.ProvisioningIP, spec.ExternalIPs = "192.168.111.5", []string{"192.168.111.5"}
				o := world(&spec, configv1.BareMetalPlatformType)
				for range 3 {
					o.apply(mustDecide(t, o))
					o.available(render.Metal3Deployment, render.BMODeployment)
				}
				return o
			},
			state: clusteroperator.ReasonDeployComplete, requeue: time.Hour,
		},
		"a spec change updates the metal3 Deployment": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				for range 3 {
					o.apply(mustDecide(t, o))
					o.available(render.Metal3Deployment, render.BMODeployment)
				}
				o.prov.Spec.ExternalIPs = []string{"10.0.0.5"}
				return o
			},
			state:  clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + secrets.IronicTLS, "Secret/" + AppliedSpecSecret, "*v1.Deployment/metal3"},
			events: []string{ReasonCertificateIssued, ReasonUpdated}, requeue: 30 * time.Second,
		},
		"invalid spec: nothing written, retried": {
			world: func(*testing.T) *observed {
				o := world(&metal3.ProvisioningSpec{ProvisioningNetwork: "Managed"}, configv1.BareMetalPlatformType)
				return o
			},
			state:  clusteroperator.ReasonInvalidConfiguration,
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig},
			events: []string{ReasonCertificateIssued, ReasonCreated, ReasonInvalidConfiguration}, requeue: time.Minute,
		},
		"paused: nothing": {
			world: func(*testing.T) *observed {
				o := world(&disabled, configv1.BareMetalPlatformType)
				o.prov.Annotations = map[string]string{metal3.ProvisioningPausedAnnotation: ""}
				o.webhookConfigs[render.CBOWebhookConfig] = nil
				return o
			},
			state:  "",
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig},
			events: []string{ReasonCertificateIssued, ReasonCreated},
		},
		"deleting: the webhook first, then the rest": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				for range 2 {
					o.apply(mustDecide(t, o))
					o.available(render.Metal3Deployment, render.BMODeployment)
				}
				now := metav1.Now()
				o.prov.DeletionTimestamp = &now
				return o
			},
			state: clusteroperator.ReasonResourceNotFound,
			deletes: []string{render.BMOWebhookConfig, render.BMODeployment, render.Metal3Deployment, render.BMOWebhookService, render.StateService,
				secrets.IronicCredentials, secrets.IronicTLS, secrets.BMOWebhookCert, AppliedSpecSecret},
			events: []string{ReasonDeleted},
		},
		"rollout past its deadline": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				for range 2 {
					o.apply(mustDecide(t, o))
					o.available(render.Metal3Deployment, render.BMODeployment)
				}
				o.deployments[render.BMODeployment].Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
				return o
			},
			state: clusteroperator.ReasonDeployTimedOut, events: []string{ReasonDeployTimedOut},
		},
		"unusable credentials: reported, not regenerated": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := world(&disabled, configv1.BareMetalPlatformType)
				o.secrets[secrets.IronicCredentials] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secrets.IronicCredentials},
					Data: map[string][]byte{secrets.KeyUsername: []byte("u")}}
				return o
			},
			state:  clusteroperator.ReasonInvalidConfiguration,
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig},
			events: []string{ReasonCertificateIssued, ReasonCreated, ReasonInvalidConfiguration}, requeue: time.Minute,
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.world(t)
			p := mustDecide(t, o)
			if p.state.Reason != tc.state {
				t.Errorf("state %q (%s), want %q", p.state.Reason, p.state.Message, tc.state)
			}
			if got := written(p); !slices.Equal(got, tc.writes) {
				t.Errorf("writes\n%q\nwant\n%q", got, tc.writes)
			}
			var deletes []string
			for _, d := range p.deletes {
				deletes = append(deletes, d.GetName())
			}
			if !slices.Equal(deletes, tc.deletes) {
				t.Errorf("deletes %q, want %q", deletes, tc.deletes)
			}
			if got := reasons(p); !slices.Equal(got, tc.events) {
				t.Errorf("events %q, want %q", got, tc.events)
			}
			if p.requeueAfter != tc.requeue {
				t.Errorf("requeue after %s, want %s", p.requeueAfter, tc.requeue)
			}
		})
	}
}

// TestInvalidMessageHasNoCredentials: the ClusterOperator is readable cluster-wide, so an invalid
// OS image URL is quoted there (and in the Event) without its user information.
func TestInvalidMessageHasNoCredentials(t *testing.T) {
	spec := disabled
	spec.ProvisioningOSDownloadURL = "https://mirror-user:hunter22@mirror.example/rhcos.qcow2.gz"
	p := mustDecide(t, world(&spec, configv1.BareMetalPlatformType))
	if p.state.Reason != clusteroperator.ReasonInvalidConfiguration {
		t.Fatalf("state %q (%s), want %q", p.state.Reason, p.state.Message, clusteroperator.ReasonInvalidConfiguration)
	}
	if !strings.Contains(p.state.Message, "sha256 query parameter is missing") || !strings.Contains(p.state.Message, "https://***@mirror.example/rhcos.qcow2.gz") {
		t.Errorf("message %q: want the missing sha256 named and the URL without credentials", p.state.Message)
	}
	for _, e := range append([]string{p.state.Message}, notes(p)...) {
		if strings.Contains(e, "hunter22") || strings.Contains(e, "mirror-user") {
			t.Errorf("credentials in %q", e)
		}
	}
	// User information the cleaner does not take for one (one slash after the scheme): the
	// value is left out, the field still named.
	spec.ProvisioningOSDownloadURL = "https:/mirror-user:hunter22@mirror.example/rhcos.qcow2.gz?sha256=" + strings.Repeat("a", 64)
	p = mustDecide(t, world(&spec, configv1.BareMetalPlatformType))
	if p.state.Reason != clusteroperator.ReasonInvalidConfiguration || !strings.Contains(p.state.Message, "provisioningOSDownloadURL") {
		t.Fatalf("state %q (%s), want %q naming the field", p.state.Reason, p.state.Message, clusteroperator.ReasonInvalidConfiguration)
	}
	for _, e := range append([]string{p.state.Message}, notes(p)...) {
		if strings.Contains(e, "hunter22") {
			t.Errorf("credentials in %q", e)
		}
	}
}

func notes(p *plan) []string {
	var out []string
	for _, e := range p.events {
		out = append(out, e.Note)
	}
	return out
}

func TestBusyMessage(t *testing.T) {
	host := func(name string, state metal3.ProvisioningState, op metal3.OperationalStatus) metal3.BareMetalHost {
		h := metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		h.Status.Provisioning.State, h.Status.OperationalStatus = state, op
		return h
	}
	many := make([]metal3.BareMetalHost, 7)
	for i := range many {
		many[i] = host(fmt.Sprintf("h%d", i), metal3.StateProvisioning, metal3.OperationalStatusOK)
	}
	for name, tc := range map[string]struct {
		hosts []metal3.BareMetalHost
		want  string
	}{
		"none":                 {},
		"idle hosts":           {hosts: []metal3.BareMetalHost{host("a", metal3.StateProvisioned, "OK"), host("b", metal3.StateInspecting, "OK"), host("c", metal3.StatePreparing, "OK")}},
		"one provisioning":     {hosts: []metal3.BareMetalHost{host("a", metal3.StateProvisioning, "OK")}, want: "1 host is provisioning, deprovisioning or servicing: ns/a (provisioning)."},
		"servicing wins":       {hosts: []metal3.BareMetalHost{host("a", metal3.StateProvisioned, metal3.OperationalStatusServicing)}, want: "ns/a (servicing)"},
		"two, sorted":          {hosts: []metal3.BareMetalHost{host("b", metal3.StateDeprovisioning, "OK"), host("a", metal3.StateProvisioning, "OK")}, want: "2 hosts are provisioning, deprovisioning or servicing: ns/a (provisioning), ns/b (deprovisioning)."},
		"more than five named": {hosts: many, want: "ns/h4 (provisioning) and 2 more"},
	} {
		t.Run(name, func(t *testing.T) {
			got := busyMessage(tc.hosts)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("busyMessage = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestAvailableAndTimedOut(t *testing.T) {
	d := func(gen, observed int64, updated, avail, unavail int32, cond string) *appsv1.Deployment {
		x := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		x.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, AvailableReplicas: avail, UnavailableReplicas: unavail}
		if cond != "" {
			x.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: cond}}
		}
		return x
	}
	for name, tc := range map[string]struct {
		d                  *appsv1.Deployment
		available, timeout bool
	}{
		"missing":                 {d: nil},
		"running":                 {d: d(2, 2, 1, 1, 0, ""), available: true},
		"not yet observed":        {d: d(3, 2, 1, 1, 0, "")},
		"old pod still available": {d: d(2, 2, 0, 1, 0, "")},
		"new pod not available":   {d: d(2, 2, 1, 0, 1, "")},
		"deadline exceeded":       {d: d(2, 2, 1, 0, 1, "ProgressDeadlineExceeded"), timeout: true},
		"deadline of an old spec": {d: d(3, 2, 1, 0, 1, "ProgressDeadlineExceeded")},
		"paused, another reason":  {d: d(2, 2, 1, 0, 1, "DeploymentPaused")},
		"surge: one unavailable":  {d: d(2, 2, 1, 1, 1, "")},
	} {
		t.Run(name, func(t *testing.T) {
			if available(tc.d) != tc.available || timedOut(tc.d) != tc.timeout {
				t.Errorf("available %v, timed out %v; want %v, %v", available(tc.d), timedOut(tc.d), tc.available, tc.timeout)
			}
		})
	}
}
