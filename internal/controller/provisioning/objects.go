package provisioning

import (
	"bytes"
	"maps"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
)

// objectWrite is one object to create (obj has no resourceVersion) or update (obj is the stored
// object with the changes applied, so the update is optimistic).
type objectWrite struct {
	obj client.Object
	// recreate: the stored object cannot be changed into the desired one (a Deployment's selector
	// is immutable); it is deleted now and created at the next reconcile.
	recreate bool
}

// planObject compares a desired object with the stored one and plans the smallest write: none
// when the stored object already covers the desired one (see covers), else the stored object with
// the desired labels, annotations, owner reference and spec. Metadata changes alone never restart
// a pod; the pod template is replaced only when it differs.
// owned objects get the Provisioning object as their controller.
func (p *plan) planObject(o *observed, desired client.Object, owned bool) {
	if owned {
		setOwner(desired, o.prov)
	}
	existing := stored(o, desired)
	if existing == nil {
		p.writes = append(p.writes, objectWrite{obj: desired})
		p.events.NormalAbout(desired, ReasonCreated, "Create", "Created "+describe(desired))
		return
	}
	merged := existing.DeepCopyObject().(client.Object)
	mergeMetadata(merged, desired)
	specChanged := false
	switch d := desired.(type) {
	case *appsv1.Deployment:
		m := merged.(*appsv1.Deployment)
		if !sameSelector(d.Spec.Selector, m.Spec.Selector) && selectsTemplate(m.Spec.Selector, d.Spec.Template.Labels) {
			// A selector cannot change; one that selects the new pods serves as well, and is kept
			// (as OpenShift's operator does): Deployments an earlier operator made (this one's
			// before it selected by the component label too) go on without a restart.
			d.Spec.Selector = m.Spec.Selector.DeepCopy()
		}
		if !sameSelector(d.Spec.Selector, m.Spec.Selector) {
			p.writes = append(p.writes, objectWrite{obj: existing, recreate: true})
			p.events.NormalAbout(existing, ReasonRecreated, "Recreate", "Recreating "+describe(desired)+": its selector differs and cannot be changed")
			return
		}
		// A desired zero is "the server's to default" for covers; replicas 0 is meant, and so is
		// paused false: a Deployment paused by hand (kubectl rollout pause) never rolls out what
		// the operator writes, and the ClusterOperator would wait for it forever.
		if !covers(&d.Spec, &m.Spec) || !equalReplicas(d.Spec.Replicas, m.Spec.Replicas) || m.Spec.Paused != d.Spec.Paused {
			m.Spec = d.Spec
			specChanged = true
		}
	case *corev1.Secret:
		m := merged.(*corev1.Secret)
		if !maps.EqualFunc(d.Data, m.Data, bytes.Equal) || d.Type != m.Type {
			m.Data, m.Type = d.Data, d.Type
			specChanged = true
		}
	case *corev1.Service:
		m := merged.(*corev1.Service)
		if !covers(&d.Spec, &m.Spec) {
			// The cluster IP is the server's and cannot change.
			m.Spec.Selector, m.Spec.Ports, m.Spec.Type = d.Spec.Selector, d.Spec.Ports, d.Spec.Type
			specChanged = true
		}
	case *admissionv1.ValidatingWebhookConfiguration:
		m := merged.(*admissionv1.ValidatingWebhookConfiguration)
		if !covers(d.Webhooks, m.Webhooks) {
			m.Webhooks = d.Webhooks
			specChanged = true
		}
	}
	if equality.Semantic.DeepEqual(merged, existing) {
		return
	}
	p.writes = append(p.writes, objectWrite{obj: merged})
	_, claimedBefore := existing.GetAnnotations()[render.OwnedAnnotation]
	_, claims := desired.GetAnnotations()[render.OwnedAnnotation]
	switch {
	case claims && !claimedBefore && !specChanged:
		p.events.NormalAbout(merged, ReasonClaimed, "Claim", "Claimed "+describe(desired)+"; its pod template already matches, so its pods keep running")
	case claims && !claimedBefore:
		p.events.NormalAbout(merged, ReasonClaimed, "Claim", "Claimed "+describe(desired)+" and updated its pod template")
	case specChanged:
		p.events.NormalAbout(merged, ReasonUpdated, "Update", "Updated "+describe(desired))
	}
}

// stored returns the stored counterpart of desired (nil when there is none).
func stored(o *observed, desired client.Object) client.Object {
	var obj client.Object
	switch desired.(type) {
	case *appsv1.Deployment:
		if d := o.deployments[desired.GetName()]; d != nil {
			obj = d
		}
	case *corev1.Service:
		if s := o.services[desired.GetName()]; s != nil {
			obj = s
		}
	case *appsv1.DaemonSet:
		if d := o.daemonSets[desired.GetName()]; d != nil {
			obj = d
		}
	case *corev1.Secret:
		if s := o.secrets[desired.GetName()]; s != nil {
			obj = s
		}
	case *admissionv1.ValidatingWebhookConfiguration:
		if w := o.webhookConfigs[desired.GetName()]; w != nil {
			obj = w
		}
	}
	if obj == nil {
		return nil
	}
	// The typed client sets no kind on stored objects; copy it for messages.
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(desired.GetObjectKind().GroupVersionKind())
	return obj
}

// serviceCAAnnotations ask OpenShift's service-ca operator to inject its CA into a webhook
// configuration or to issue a Service's serving certificate. OpenShift's cluster-baremetal-operator
// set them on the webhook configurations and Services it made; this operator issues those
// certificates itself (PlanTLS), so on the objects it claims they are removed: left, service-ca
// and this operator would overwrite each other's caBundle at every change, and the API server
// would refuse BareMetalHost and Provisioning writes whenever service-ca's CA was in place.
var serviceCAAnnotations = []string{
	"service.beta.openshift.io/inject-cabundle",
	"service.beta.openshift.io/serving-cert-secret-name",
	"service.alpha.openshift.io/serving-cert-secret-name",
}

// mergeMetadata adds desired's labels, annotations and owner references to merged, keeping what
// others put there (the machine-api-operator's own annotation stays: ours wins when both are
// present, and a downgrade finds what it left), but for serviceCAAnnotations.
func mergeMetadata(merged, desired client.Object) {
	merged.SetLabels(union(merged.GetLabels(), desired.GetLabels()))
	annotations := union(merged.GetAnnotations(), desired.GetAnnotations())
	for _, a := range serviceCAAnnotations {
		delete(annotations, a)
	}
	merged.SetAnnotations(annotations)
	refs := merged.GetOwnerReferences()
	for _, want := range desired.GetOwnerReferences() {
		found := false
		for i := range refs {
			if refs[i].UID == want.UID {
				refs[i], found = want, true
			} else if want.Controller != nil && *want.Controller && refs[i].Controller != nil && *refs[i].Controller {
				// Claiming: there is one controller, and it is us now.
				refs[i].Controller = nil
			}
		}
		if !found {
			refs = append(refs, want)
		}
	}
	merged.SetOwnerReferences(refs)
}

// equalReplicas compares replica counts, nil being the server's default of one.
func equalReplicas(a, b *int32) bool {
	one := int32(1)
	if a == nil {
		a = &one
	}
	if b == nil {
		b = &one
	}
	return *a == *b
}

func union(have, want map[string]string) map[string]string {
	if len(want) == 0 {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

// setOwner makes the Provisioning object the controller of obj: deleting it deletes the stack
// (the operator also deletes it itself, before removing its finalizer).
func setOwner(obj client.Object, prov *metal3.Provisioning) {
	if prov == nil {
		return
	}
	t := true
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: metal3.GroupVersion.String(), Kind: "Provisioning", Name: prov.Name, UID: prov.UID,
		Controller: &t, BlockOwnerDeletion: &t,
	}})
}

func sameSelector(a, b *metav1.LabelSelector) bool { return covers(a, b) && covers(b, a) }

// selectsTemplate: the selector selects pods with the template's labels.
func selectsTemplate(sel *metav1.LabelSelector, template map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(template))
}
