package provisioning

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/test/poll"
)

func secret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func containerNames(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// TestPause: with the pause annotation, a spec change changes nothing (the stack, its Secrets, the
// ClusterOperator); removing the annotation applies it.
func TestPause(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	updateSpec(t, func(p *metal3.Provisioning) {
		p.Annotations = map[string]string{metal3.ProvisioningPausedAnnotation: ""}
	})
	before := versions(t, op.ns)
	reconciles := reconcileCount()
	updateSpec(t, func(p *metal3.Provisioning) { p.Spec.ExternalIPs = []string{"10.0.0.5"} })
	poll.Until(t, "a reconcile", func() (bool, string) { return reconcileCount() > reconciles, "none" })
	time.Sleep(time.Second)
	after := versions(t, op.ns)
	delete(before, "provisioning")
	delete(after, "provisioning")
	if !mapsEqual(before, after) {
		t.Fatalf("changes while paused:\nbefore %v\nafter  %v", before, after)
	}
	updateSpec(t, func(p *metal3.Provisioning) { delete(p.Annotations, metal3.ProvisioningPausedAnnotation) })
	poll.Until(t, "the external IP in the metal3 Deployment", func() (bool, string) {
		d := deployment(t, op.ns, render.Metal3Deployment)
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "IRONIC_EXTERNAL_IP" && e.Value == "10.0.0.5" {
				return true, ""
			}
		}
		return false, "not yet"
	})
	waitCO(t, map[string]string{"Progressing": "True/SyncingResources"})
}

// TestDeletion: deleting the Provisioning object deletes everything of the stack, the webhook
// configuration first, then removes the finalizer; while another finalizer keeps the object, the
// ClusterOperator reports ResourceNotFound (Available=False), and once it is gone it waits for a
// new object. The ClusterOperator itself stays.
func TestDeletion(t *testing.T) {
	op := setup(t, options{})
	start := time.Now()
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	poll.Until(t, "the baremetal-operator webhook configuration", func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Name: render.BMOWebhookConfig}, &admissionv1.ValidatingWebhookConfiguration{})
		return err == nil, "missing"
	})
	const other = "example.com/keep"
	updateSpec(t, func(p *metal3.Provisioning) { p.Finalizers = append(p.Finalizers, other) })
	if err := env.Client.Delete(context.Background(), getProvisioning(t)); err != nil {
		t.Fatal(err)
	}
	c := waitCO(t, map[string]string{"Available": "False/ResourceNotFound", "Progressing": "True/ResourceNotFound", "Degraded": "False/AsExpected"})
	if m := clusteroperator.Condition(c, configv1.OperatorProgressing).Message; m != "Waiting for Provisioning CR" {
		t.Errorf("Progressing message %q", m)
	}
	poll.Until(t, "the operator's finalizer to go", func() (bool, string) {
		p := getProvisioning(t)
		return !slices.Contains(p.Finalizers, metal3.ProvisioningFinalizer), fmt.Sprint(p.Finalizers)
	})
	deps, secs, svcs := listNames(t, op.ns)
	if len(deps)+len(secs)+len(svcs) != 0 {
		t.Errorf("left behind: %v %v %v", deps, secs, svcs)
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: render.BMOWebhookConfig}, &admissionv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("the baremetal-operator webhook configuration is left (%v)", err)
	}
	waitEvent(t, start, ReasonDeleted, "being deleted")
	updateSpec(t, func(p *metal3.Provisioning) { p.Finalizers = nil })
	poll.Until(t, "the Provisioning object to be gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Name: metal3.ProvisioningSingletonName}, &metal3.Provisioning{})
		return apierrors.IsNotFound(err), "still there"
	})
	waitCO(t, map[string]string{"Available": "True/WaitingForProvisioningCR"})
	if co(t) == nil {
		t.Error("the ClusterOperator was deleted")
	}
}

// TestDeletionWhilePaused: deletion goes ahead on a paused object (a paused object must still be
// deletable).
func TestDeletionWhilePaused(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, disabled, map[string]string{metal3.ProvisioningPausedAnnotation: ""})
	poll.Until(t, "a reconcile", func() (bool, string) { return reconcileCount() > 0, "none" })
	if deployment(t, op.ns, render.Metal3Deployment) != nil {
		t.Fatal("a paused Provisioning object was deployed")
	}
	updateSpec(t, func(p *metal3.Provisioning) { p.Finalizers = []string{metal3.ProvisioningFinalizer} })
	if err := env.Client.Delete(context.Background(), getProvisioning(t)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the Provisioning object to be gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Name: metal3.ProvisioningSingletonName}, &metal3.Provisioning{})
		return apierrors.IsNotFound(err), "still there"
	})
}

// TestSecretsGeneratedOnce: the Ironic password survives reconciles, a deleted Deployment and a
// damaged htpasswd (which is repaired from the password); the baremetal-operator mounts the user
// and password, Ironic gets the htpasswd, and no credential reaches an event or a status.
func TestSecretsGeneratedOnce(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	creds := secret(t, op.ns, secrets.IronicCredentials)
	password := string(creds.Data[secrets.KeyPassword])
	if len(password) < 16 || !strings.HasPrefix(string(creds.Data[secrets.KeyHtpasswd]), secrets.IronicUsername+":$2y$") {
		t.Fatalf("password of %d characters, htpasswd without the user and a bcrypt hash", len(password))
	}

	if err := env.Client.Delete(context.Background(), deployment(t, op.ns, render.Metal3Deployment)); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, op.ns, render.Metal3Deployment)
	creds.Data[secrets.KeyHtpasswd] = []byte("ironic-user:broken")
	if err := env.Client.Update(context.Background(), creds); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the htpasswd repaired", func() (bool, string) {
		s := secret(t, op.ns, secrets.IronicCredentials)
		return strings.HasPrefix(string(s.Data[secrets.KeyHtpasswd]), secrets.IronicUsername+":$2y$"), string(s.Data[secrets.KeyHtpasswd])
	})
	if got := string(secret(t, op.ns, secrets.IronicCredentials).Data[secrets.KeyPassword]); got != password {
		t.Fatal("the password was regenerated")
	}

	// Where the credentials are used.
	bmo := deployment(t, op.ns, render.BMODeployment)
	var items []string
	for _, v := range bmo.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secrets.IronicCredentials {
			for _, it := range v.Secret.Items {
				items = append(items, it.Key)
			}
		}
	}
	if !slices.Equal(items, []string{secrets.KeyUsername, secrets.KeyPassword}) {
		t.Errorf("the baremetal-operator mounts %v of the credentials", items)
	}

	// Nothing outside the Secret shows the password.
	for _, e := range provisioningEvents(t) {
		if strings.Contains(e.Note, password) {
			t.Errorf("event %s shows the password", e.Reason)
		}
	}
	coJSON, _ := json.Marshal(co(t))
	provJSON, _ := json.Marshal(getProvisioning(t))
	depJSON, _ := json.Marshal(deployment(t, op.ns, render.Metal3Deployment))
	for what, data := range map[string][]byte{"ClusterOperator": coJSON, "Provisioning": provJSON, "metal3 Deployment": depJSON} {
		if strings.Contains(string(data), password) {
			t.Errorf("the %s shows the password", what)
		}
	}
}

// TestUnusableCredentials: a credentials Secret without a password is not overwritten (a new
// password would lock out every client holding the old one); the operator reports it.
func TestUnusableCredentials(t *testing.T) {
	op := setup(t, options{noStart: true})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: secrets.IronicCredentials},
		Data: map[string][]byte{secrets.KeyUsername: []byte("ironic-user")}}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	op.start(t, "")
	createProvisioning(t, disabled, nil)
	c := waitCO(t, map[string]string{"Degraded": "True/InvalidConfiguration"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; !strings.Contains(m, "has no password") || !strings.Contains(m, "delete the Secret") {
		t.Errorf("Degraded message %q", m)
	}
	if _, ok := secret(t, op.ns, secrets.IronicCredentials).Data[secrets.KeyPassword]; ok {
		t.Error("a password was written into the existing Secret")
	}
	if err := env.Client.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, op.ns, render.Metal3Deployment)
	if secret(t, op.ns, secrets.IronicCredentials).Data[secrets.KeyPassword] == nil {
		t.Error("no new password after the Secret was deleted")
	}
}

// TestCertificateRenewal: Ironic's certificate is renewed a month before it expires and when its
// names change (a new provisioning IP), keeping its CA; the metal3 pod template changes with it
// (Ironic loads the certificate at start), the baremetal-operator's does not (the CA is the same).
func TestCertificateRenewal(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled, ProvisioningIP: "192.168.111.5"}, nil)
	deployComplete(t, op.ns)
	first := secret(t, op.ns, secrets.IronicTLS)
	metal3Gen, bmoGen := deployment(t, op.ns, render.Metal3Deployment).Generation, deployment(t, op.ns, render.BMODeployment).Generation
	if !strings.Contains(certNames(t, first), "192.168.111.5") || !strings.Contains(certNames(t, first), "metal3-state."+op.ns+".svc") {
		t.Fatalf("names %s", certNames(t, first))
	}

	// Eleven months on.
	start := time.Now()
	op.clock.Set(time.Now().Add(secrets.ServingValidity - secrets.RenewBefore + 24*time.Hour))
	updateSpec(t, func(p *metal3.Provisioning) { p.Annotations = map[string]string{"example.com/wake": "1"} })
	waitEvent(t, start, ReasonCertificateIssued, "expires on")
	renewed := secret(t, op.ns, secrets.IronicTLS)
	if string(renewed.Data[secrets.KeyCert]) == string(first.Data[secrets.KeyCert]) || string(renewed.Data[secrets.KeyCA]) != string(first.Data[secrets.KeyCA]) {
		t.Fatal("the serving certificate was not renewed, or the CA changed")
	}
	poll.Until(t, "the metal3 pod template to follow the certificate", func() (bool, string) {
		d := deployment(t, op.ns, render.Metal3Deployment)
		return d.Generation == metal3Gen+1 && d.Spec.Template.Annotations[render.TLSFingerprintAnnotation] == secrets.Fingerprint(renewed.Data[secrets.KeyCert]), "not yet"
	})
	if g := deployment(t, op.ns, render.BMODeployment).Generation; g != bmoGen {
		t.Errorf("the baremetal-operator was restarted (generation %d → %d) though the CA did not change", bmoGen, g)
	}

	// A new provisioning IP.
	start = time.Now()
	updateSpec(t, func(p *metal3.Provisioning) { p.Spec.ProvisioningIP = "192.168.111.6" })
	waitEvent(t, start, ReasonCertificateIssued, "names")
	poll.Until(t, "the new IP in the certificate", func() (bool, string) {
		names := certNames(t, secret(t, op.ns, secrets.IronicTLS))
		return strings.Contains(names, "192.168.111.6") && !strings.Contains(names, "192.168.111.5"), names
	})
}

func certNames(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	p := secrets.PlanTLS(s.Data, []string{"no-such-name"}, time.Now())
	if p.Action != secrets.Issue {
		t.Fatalf("plan %+v", p)
	}
	return p.Reason
}

// TestBusyHostsHoldUpgrades: Upgradeable is False, naming the host, while a host is provisioning,
// deprovisioning or servicing, and True again when it is done.
func TestBusyHostsHoldUpgrades(t *testing.T) {
	op := setup(t, options{})
	// The host is created before the baremetal-operator's webhook is configured: nothing serves it
	// here (its status is not validated).
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: "worker-0"},
		Spec: metal3.BareMetalHostSpec{Online: true, BMC: metal3.BMCDetails{Address: "redfish://192.168.1.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
	if err := env.Client.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	for _, tc := range []struct {
		state  metal3.ProvisioningState
		opStat metal3.OperationalStatus
		busy   string
	}{
		{metal3.StateProvisioning, metal3.OperationalStatusOK, "worker-0 (provisioning)"},
		{metal3.StateProvisioned, metal3.OperationalStatusOK, ""},
		{metal3.StateProvisioned, metal3.OperationalStatusServicing, "worker-0 (servicing)"},
		{metal3.StateDeprovisioning, metal3.OperationalStatusOK, "worker-0 (deprovisioning)"},
		{metal3.StateAvailable, metal3.OperationalStatusOK, ""},
	} {
		setHostStatus(t, h, tc.state, tc.opStat)
		if tc.busy == "" {
			waitCO(t, map[string]string{"Upgradeable": "True/AsExpected"})
			continue
		}
		waitCO(t, map[string]string{"Available": "True/DeployComplete"})
		poll.Until(t, "Upgradeable=False naming "+tc.busy, func() (bool, string) {
			u := clusteroperator.Condition(co(t), configv1.OperatorUpgradeable)
			return u.Status == configv1.ConditionFalse && u.Reason == clusteroperator.ReasonHostsBusy && strings.Contains(u.Message, tc.busy), u.Message
		})
	}
}

func setHostStatus(t *testing.T, h *metal3.BareMetalHost, state metal3.ProvisioningState, opStat metal3.OperationalStatus) {
	t.Helper()
	cur := &metal3.BareMetalHost{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(h), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Provisioning.State, cur.Status.OperationalStatus = state, opStat
	if err := env.Client.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
}

// TestDeployTimedOut: a Deployment past its progress deadline makes the operator Degraded with
// DeployTimedOut (and an event), Available stays True; a finished rollout clears it.
func TestDeployTimedOut(t *testing.T) {
	op := setup(t, options{})
	start := time.Now()
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	d := deployment(t, op.ns, render.Metal3Deployment)
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 0, 1
	if err := env.Client.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	c := waitCO(t, map[string]string{"Degraded": "True/DeployTimedOut", "Available": "True/DeployTimedOut", "Progressing": "True/DeployTimedOut"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; m != "metal3 deployment rollout taking too long" {
		t.Errorf("Degraded message %q", m)
	}
	waitEvent(t, start, ReasonDeployTimedOut, "metal3")
	markAvailable(t, op.ns, render.Metal3Deployment)
	waitCO(t, map[string]string{"Degraded": "False/AsExpected", "Available": "True/DeployComplete"})
}

// TestDeploymentCrashLooping: a Deployment that goes down after its rollout finished is progress
// for a while, then Degraded with DeploymentCrashLooping (and an event), not Progressing; running
// again clears it. The time is the Deployment's Available condition's, on the operator's clock.
func TestDeploymentCrashLooping(t *testing.T) {
	op := setup(t, options{})
	start := time.Now()
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	down := func(since time.Duration) {
		t.Helper()
		d := deployment(t, op.ns, render.Metal3Deployment)
		d.Status.AvailableReplicas, d.Status.UnavailableReplicas, d.Status.ReadyReplicas = 0, 1, 0
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable",
				LastTransitionTime: metav1.NewTime(op.clock.Now().Add(-since))},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}
		if err := env.Client.Status().Update(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	down(time.Minute)
	waitCO(t, map[string]string{"Progressing": "True/SyncingResources", "Degraded": "False/AsExpected"})
	down(10 * time.Minute)
	c := waitCO(t, map[string]string{"Degraded": "True/DeploymentCrashLooping", "Progressing": "False/AsExpected",
		"Available": "False/DeploymentCrashLooping"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; !strings.HasPrefix(m, "metal3 deployment unavailable for more than 5 minutes") {
		t.Errorf("Degraded message %q", m)
	}
	waitEvent(t, start, ReasonDeploymentCrashLooping, "metal3")
	markAvailable(t, op.ns, render.Metal3Deployment)
	waitCO(t, map[string]string{"Degraded": "False/AsExpected", "Available": "True/DeployComplete"})
}

// TestPodCrashLooping: a container of the stack that keeps crashing after passing its readiness
// probe (so the Deployment stays Available between crashes) makes the operator Degraded with
// DeploymentCrashLooping naming the container, from the pod the operator watches; the pod gone
// (replaced), it is complete again.
func TestPodCrashLooping(t *testing.T) {
	op := setup(t, options{})
	start := time.Now()
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "metal3-crashing", Namespace: op.ns,
			Labels: map[string]string{"k8s-app": "metal3", render.ComponentLabel: render.StateService}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "metal3-ironic", Image: "example.com/ironic"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "metal3-ironic", RestartCount: 5, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(op.clock.Now())}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2,
			StartedAt: metav1.NewTime(op.clock.Now().Add(-80 * time.Second)), FinishedAt: metav1.NewTime(op.clock.Now().Add(-20 * time.Second))}}}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	c := waitCO(t, map[string]string{"Degraded": "True/DeploymentCrashLooping", "Progressing": "False/AsExpected"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; !strings.Contains(m, "container metal3-ironic of pod metal3-crashing restarted 5 times") {
		t.Errorf("Degraded message %q does not name the container", m)
	}
	waitEvent(t, start, ReasonDeploymentCrashLooping, "metal3-ironic")
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitCO(t, map[string]string{"Degraded": "False/AsExpected", "Available": "True/DeployComplete"})
}

// TestSyncError: a write the API server refuses for good (the Ironic certificate's Secret made
// immutable, then due for renewal) is not Degraded at once (conflicts clear by themselves), is
// Degraded with SyncError naming the Secret once it has lasted five minutes on the operator's
// clock, with one event, and clears when the write goes through again.
func TestSyncError(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	s := secret(t, op.ns, secrets.IronicTLS)
	immutable := true
	s.Immutable = &immutable
	if err := env.Client.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	errorsBefore := reconcileErrors()
	renewal := time.Now().Add(secrets.ServingValidity - secrets.RenewBefore + 24*time.Hour)
	op.clock.Set(renewal)
	updateSpec(t, func(p *metal3.Provisioning) { p.Annotations = map[string]string{"example.com/wake": "1"} })
	poll.Until(t, "the renewal to fail", func() (bool, string) {
		return reconcileErrors() >= errorsBefore+2, "no failed reconcile yet"
	})
	if c := clusteroperator.Condition(co(t), configv1.OperatorDegraded); c == nil || c.Status != configv1.ConditionFalse {
		t.Fatalf("Degraded before the grace: %+v", c)
	}

	op.clock.Set(renewal.Add(syncErrorGrace + time.Minute))
	updateSpec(t, func(p *metal3.Provisioning) { p.Annotations = map[string]string{"example.com/wake": "2"} })
	c := waitCO(t, map[string]string{"Degraded": "True/SyncError", "Available": "True/SyncError", "Progressing": "True/SyncError"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; !strings.Contains(m, secrets.IronicTLS) || !strings.Contains(m, "immutable") {
		t.Errorf("Degraded message %q does not name the Secret and the refusal", m)
	}
	waitEvent(t, start, ReasonSyncError, secrets.IronicTLS)

	if err := env.Client.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	waitCO(t, map[string]string{"Degraded": "False/AsExpected"})
	var warnings []string
	for _, e := range provisioningEvents(t) {
		// The Provisioning is cluster-wide and its events outlive a test: this test's name its
		// namespace (an earlier test's, in the same second, named another).
		if e.Reason == ReasonSyncError && strings.Contains(e.Note, op.ns+"/") && !e.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			warnings = append(warnings, fmt.Sprintf("%s (regarding version %s)", e.Note, e.Regarding.ResourceVersion))
		}
	}
	if len(warnings) != 1 {
		t.Errorf("%d SyncError events, want 1: %q", len(warnings), warnings)
	}
}

// TestUpgrade: a new release version shows as Progressing (Available stays True) until the stack
// runs at it, then versions name it.
func TestUpgrade(t *testing.T) {
	op := setup(t, options{release: "4.21.0"})
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns)
	op.stop()
	// The new release: a new operator with new images.
	if err := writeFile(op.images, strings.ReplaceAll(testImages, ":1", ":2")); err != nil {
		t.Fatal(err)
	}
	op.start(t, "4.22.0")
	c := waitCO(t, map[string]string{"Progressing": "True/SyncingResources", "Available": "True/SyncingResources", "Degraded": "False/AsExpected"})
	if v := c.Status.Versions; len(v) != 1 || v[0].Version != "4.21.0" {
		t.Errorf("versions %v before the new release runs", v)
	}
	if img := deployment(t, op.ns, render.BMODeployment).Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":2") {
		t.Errorf("baremetal-operator image %s after the upgrade", img)
	}
	c = deployComplete(t, op.ns)
	poll.Until(t, "the new version", func() (bool, string) {
		c = co(t)
		return len(c.Status.Versions) == 1 && c.Status.Versions[0].Version == "4.22.0", "versions " + versionsOf(c)
	})
}

func versionsOf(c *configv1.ClusterOperator) string {
	b, _ := json.Marshal(c.Status.Versions)
	return string(b)
}

// TestNetworkModeSwitch: from Managed to Disabled the metal3 pod loses the DHCP server and the
// static IP containers (the stored, server-defaulted template has more containers than the new
// one: they must not stay).
func TestNetworkModeSwitch(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, managedSpec, nil)
	d := waitDeployment(t, op.ns, render.Metal3Deployment)
	if names := containerNames(d); !slices.Contains(names, "metal3-dnsmasq") || !slices.Contains(names, "metal3-static-ip-manager") {
		t.Fatalf("Managed: containers %v", names)
	}
	updateSpec(t, func(p *metal3.Provisioning) { p.Spec = disabled })
	poll.Until(t, "the Disabled containers", func() (bool, string) {
		names := containerNames(deployment(t, op.ns, render.Metal3Deployment))
		return slices.Equal(names, []string{"metal3-ironic", "metal3-httpd"}), strings.Join(names, ",")
	})
	if inits := deployment(t, op.ns, render.Metal3Deployment).Spec.Template.Spec.InitContainers; len(inits) != 1 {
		t.Errorf("init containers %d, want the machine OS images only", len(inits))
	}
}
