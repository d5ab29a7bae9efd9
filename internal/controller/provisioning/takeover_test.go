package provisioning

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// runningStack is what the machine-api-operator left running: its Secrets (without this
// operator's label) and a metal3 Deployment marked machine.openshift.io/owned, made from the same
// Secrets and spec. change edits the Deployment before it is created.
func runningStack(t *testing.T, ns string, spec metal3.ProvisioningSpec, change func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	creds, err := secrets.NewIronicCredentials()
	if err != nil {
		t.Fatal(err)
	}
	images, err := render.ParseImages("test", []byte(testImages))
	if err != nil {
		t.Fatal(err)
	}
	in := render.Input{Namespace: ns, Spec: spec, Images: images,
		Platform: platform.Features{Platform: configv1.BareMetalPlatformType, Modes: []metal3.ProvisioningNetwork{"Managed", "Unmanaged", "Disabled"}}}
	tls, err := secrets.Apply(secrets.Plan{Action: secrets.Replace}, nil, "metal3-ironic", render.IronicSANs(in), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	in.IronicTLSFingerprint, in.IronicCAFingerprint = secrets.Fingerprint(tls[secrets.KeyCert]), secrets.Fingerprint(tls[secrets.KeyCA])
	in.IronicCredentialsFingerprint = secrets.CredentialsFingerprint(creds)
	for name, data := range map[string]map[string][]byte{secrets.IronicCredentials: creds, secrets.IronicTLS: tls} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	d := render.Render(in).Metal3
	d.Annotations = map[string]string{render.MAOOwnedAnnotation: ""}
	if change != nil {
		change(d)
	}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	return deployment(t, ns, render.Metal3Deployment)
}

// TestTakeOverUnchanged: a running metal3 Deployment whose pod template is what this operator
// renders is claimed without touching the template (its generation stays, so no new pod: Ironic
// keeps its database); the ClusterOperator exists by then (the machine-api-operator's downgrade
// guard) and the machine-api-operator's own mark stays.
func TestTakeOverUnchanged(t *testing.T) {
	op := setup(t, options{noStart: true})
	before := runningStack(t, op.ns, disabled, nil)
	start := time.Now()
	op.start(t, "")
	createProvisioning(t, disabled, nil)
	waitEvent(t, start, ReasonClaimed, "already matches")
	if co(t) == nil {
		t.Fatal("claimed before the ClusterOperator exists")
	}
	after := deployment(t, op.ns, render.Metal3Deployment)
	if _, ok := after.Annotations[render.OwnedAnnotation]; !ok {
		t.Fatalf("annotations %v: not claimed", after.Annotations)
	}
	if _, ok := after.Annotations[render.MAOOwnedAnnotation]; !ok {
		t.Error("the machine-api-operator's annotation was removed")
	}
	if len(after.OwnerReferences) != 1 || after.OwnerReferences[0].Name != metal3.ProvisioningSingletonName {
		t.Errorf("owner references %v", after.OwnerReferences)
	}
	// The Deployment's generation moves with its annotations too (the apps API counts them);
	// what restarts pods is the template, which the deployment controller hashes.
	if !reflect.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Fatalf("the pod template changed:\nbefore %+v\nafter  %+v", before.Spec.Template, after.Spec.Template)
	}
	markAvailable(t, op.ns, render.Metal3Deployment)
	deployComplete(t, op.ns)
	if tmpl := deployment(t, op.ns, render.Metal3Deployment).Spec.Template; !reflect.DeepEqual(tmpl, before.Spec.Template) {
		t.Error("the pod template changed by the end")
	}
}

// TestTakeOverChanged: a running metal3 Deployment with another pod template (an older Ironic
// image) is claimed and its template replaced once; later reconciles leave it alone.
func TestTakeOverChanged(t *testing.T) {
	op := setup(t, options{noStart: true})
	before := runningStack(t, op.ns, disabled, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/mf/ironic:0"
	})
	start := time.Now()
	op.start(t, "")
	createProvisioning(t, disabled, nil)
	waitEvent(t, start, ReasonClaimed, "updated its pod template")
	after := deployment(t, op.ns, render.Metal3Deployment)
	// One write: the claim and the template together.
	if after.Generation != before.Generation+1 || after.Spec.Template.Spec.Containers[0].Image != "registry.example.com/mf/ironic:1" {
		t.Fatalf("generation %d → %d, image %s", before.Generation, after.Generation, after.Spec.Template.Spec.Containers[0].Image)
	}
	deployComplete(t, op.ns)
	reconciles := reconcileCount()
	updateSpec(t, func(p *metal3.Provisioning) { p.Annotations = map[string]string{"example.com/wake": "1"} })
	poll.Until(t, "a reconcile", func() (bool, string) { return reconcileCount() > reconciles, "none" })
	time.Sleep(time.Second)
	if g := deployment(t, op.ns, render.Metal3Deployment).Generation; g != after.Generation {
		t.Errorf("the template was changed again: generation %d → %d", after.Generation, g)
	}
}

// TestTakeOverKeepsASelectorThatSelectsThePods: a Deployment whose selector differs but selects the
// pods (this operator's before it selected by the component label too: k8s-app alone) keeps it,
// and its pods, as OpenShift's operator does.
func TestTakeOverKeepsASelectorThatSelectsThePods(t *testing.T) {
	op := setup(t, options{noStart: true})
	before := runningStack(t, op.ns, disabled, func(d *appsv1.Deployment) {
		d.Spec.Selector.MatchLabels = map[string]string{"k8s-app": "metal3"}
	})
	start := time.Now()
	op.start(t, "")
	createProvisioning(t, disabled, nil)
	waitEvent(t, start, ReasonClaimed, "pods keep running")
	deployComplete(t, op.ns)
	after := deployment(t, op.ns, render.Metal3Deployment)
	// (A claim's annotation bumps a Deployment's generation; its template stays.)
	if after.UID != before.UID || len(after.Spec.Selector.MatchLabels) != 1 || !reflect.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Fatalf("UID %s → %s, selector %v, template changed %v", before.UID, after.UID, after.Spec.Selector.MatchLabels,
			!reflect.DeepEqual(after.Spec.Template, before.Spec.Template))
	}
}

// TestTakeOverLeftovers: OpenShift's operator's ironic-proxy and metal3-image-cache DaemonSets and
// the ironic-proxy Service, owned by the Provisioning object, are removed; the metal3-state Service
// selects the metal3 pod by the component label, not the DaemonSets' pods; a DaemonSet of the same
// name that is not the stack's (no owner, no component label) stays.
func TestTakeOverLeftovers(t *testing.T) {
	op := setup(t, options{noStart: true})
	runningStack(t, op.ns, disabled, nil)
	prov := createProvisioning(t, disabled, nil)
	ctx := context.Background()
	owner := metav1.OwnerReference{APIVersion: "metal3.io/v1alpha1", Kind: "Provisioning", Name: prov.Name, UID: prov.UID, Controller: ptr.To(true)}
	ds := func(name string, owned bool) *appsv1.DaemonSet {
		labels := map[string]string{"app": "someone-elses"}
		if owned {
			labels = map[string]string{"k8s-app": "metal3", render.ComponentLabel: name}
		}
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: name, Labels: labels},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/x"}}}}}}
		if owned {
			d.OwnerReferences = []metav1.OwnerReference{owner}
		}
		return d
	}
	proxySvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: render.IronicProxy, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Port: 6385}}}}
	for _, obj := range []client.Object{ds(render.IronicProxy, true), ds(render.ImageCache, false), proxySvc} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	op.start(t, "")
	waitEvent(t, start, ReasonRemoved, "DaemonSet "+op.ns+"/"+render.IronicProxy)
	poll.Until(t, "the ironic-proxy DaemonSet and Service gone", func() (bool, string) {
		errD := env.Client.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: render.IronicProxy}, &appsv1.DaemonSet{})
		errS := env.Client.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: render.IronicProxy}, &corev1.Service{})
		return apierrors.IsNotFound(errD) && apierrors.IsNotFound(errS), fmt.Sprint(errD, errS)
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: render.ImageCache}, &appsv1.DaemonSet{}); err != nil {
		t.Fatalf("a DaemonSet the Provisioning object does not own: %v", err)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: render.StateService}, svc); err != nil ||
		!maps.Equal(svc.Spec.Selector, map[string]string{render.ComponentLabel: render.StateService}) {
		t.Fatalf("metal3-state selector %v: %v", svc.Spec.Selector, err)
	}
}

// TestTakeOverSelector: a Deployment whose selector differs and does not select the pods cannot
// be changed: it is deleted and created anew.
func TestTakeOverSelector(t *testing.T) {
	op := setup(t, options{noStart: true})
	before := runningStack(t, op.ns, disabled, func(d *appsv1.Deployment) {
		d.Spec.Selector.MatchLabels["api"] = "clusterapi"
		d.Spec.Template.Labels["api"] = "clusterapi"
	})
	start := time.Now()
	op.start(t, "")
	createProvisioning(t, disabled, nil)
	waitEvent(t, start, ReasonRecreated, "selector differs")
	poll.Until(t, "a new metal3 Deployment", func() (bool, string) {
		d := deployment(t, op.ns, render.Metal3Deployment)
		return d != nil && d.UID != before.UID && d.Spec.Selector.MatchLabels["api"] == "", "not yet"
	})
}

// TestTakeOverDropsServiceCAAnnotations: OpenShift's operator asked service-ca to inject its CA
// into the webhook configuration; claimed, the configuration carries this operator's CA and no
// longer that request (service-ca and the operator would overwrite each other's caBundle).
func TestTakeOverDropsServiceCAAnnotations(t *testing.T) {
	op := setup(t, options{noStart: true})
	const inject = "service.beta.openshift.io/inject-cabundle"
	old := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: render.BMOWebhookConfig,
		Annotations: map[string]string{inject: "true", "example.com/keep": "1"}}}
	if err := env.Client.Create(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), old) })
	op.start(t, "")
	createProvisioning(t, disabled, nil)
	deployComplete(t, op.ns) // the webhook is configured once the baremetal-operator runs
	poll.Until(t, "the webhook configuration claimed without service-ca's annotation", func() (bool, string) {
		got := &admissionv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: render.BMOWebhookConfig}, got); err != nil {
			return false, err.Error()
		}
		_, injected := got.Annotations[inject]
		return !injected && got.Annotations["example.com/keep"] == "1" && len(got.Webhooks) > 0, fmt.Sprintf("%v, %d webhooks", got.Annotations, len(got.Webhooks))
	})
}
