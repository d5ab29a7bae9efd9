package provisioning

import (
	"errors"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// secretComponent is the component label value of the Secrets the operator makes.
const secretComponent = "secrets"

// planSecrets decides the stack's Secrets (the Ironic credentials, Ironic's certificate, the
// baremetal-operator's webhook certificate, the copy of the cluster's pull secret) and returns the
// render input built from them.
func (p *plan) planSecrets(o *observed) (render.Input, error) {
	in := render.Input{Namespace: o.namespace, Spec: o.prov.Spec, Images: o.images, Platform: o.features, Proxy: o.proxy,
		IronicHostIPs: ironicHostIPs(o)}

	creds := o.secrets[secrets.IronicCredentials]
	if creds == nil {
		data, err := secrets.NewIronicCredentials()
		if err != nil {
			return in, err
		}
		p.putSecret(o, nil, secrets.IronicCredentials, data)
		in.IronicCredentialsFingerprint = secrets.CredentialsFingerprint(data)
		p.events.NormalAbout(secretRef(o, secrets.IronicCredentials), ReasonSecretGenerated, "Generate", "Generated the Ironic credentials in Secret "+secrets.IronicCredentials)
	} else {
		data, changed, err := secrets.RepairIronicCredentials(creds.Data)
		if err != nil {
			return in, err
		}
		if changed {
			p.events.NormalAbout(creds, ReasonSecretGenerated, "Repair", "Rewrote the htpasswd of Secret "+secrets.IronicCredentials+" from its password")
		}
		p.putSecret(o, creds, secrets.IronicCredentials, data)
		in.IronicCredentialsFingerprint = secrets.CredentialsFingerprint(data)
	}

	tls := p.planTLS(o, secrets.IronicTLS, "metal3-ironic", render.IronicSANs(in))
	in.IronicTLSFingerprint = secrets.Fingerprint(tls[secrets.KeyCert])
	in.IronicCAFingerprint = secrets.Fingerprint(tls[secrets.KeyCA])
	webhook := p.planTLS(o, secrets.BMOWebhookCert, "metal3-baremetal-operator-webhook", render.ServiceSANs(o.namespace, render.BMOWebhookService))
	in.BMOWebhookCABundle = webhook[secrets.KeyCA]
	p.planPullSecret(o, &in)
	return in, nil
}

// planPullSecret copies the cluster's pull secret into the stack's namespace for the
// image-customization-controller, the one component that uses it, and gives the render input its
// digest. Without a pull secret, or without the controller, there is no copy (one left is
// removed) and the controller runs without credentials: a cluster whose registry needs none.
func (p *plan) planPullSecret(o *observed, in *render.Input) {
	existing := o.secrets[secrets.PullSecret]
	data := secrets.PullSecretData(o.clusterPullSecret)
	if data == nil || !in.ICCDeployed() {
		if existing != nil && ours(existing, o.prov) {
			p.deletes = append(p.deletes, existing)
			why := "the cluster has no pull secret"
			if data != nil {
				why = "the stack has no image-customization-controller"
			}
			p.events.NormalAbout(existing, ReasonRemoved, "Delete", "Removed "+describe(existing)+": "+why)
		}
		return
	}
	p.putSecret(o, existing, secrets.PullSecret, data)
	in.PullSecretFingerprint = secrets.PullSecretFingerprint(data)
}

// ironicHostIPs are the metal3 pod's addresses, as its endpoints show them. While the metal3
// Deployment is unavailable and no endpoint has an address (its Recreate rollout stopped the old
// pod before the new one exists, or its node is gone), they are the last ones the
// image-customization-controller was given: without them it would be scaled to zero and lose
// Ironic's URL at every metal3 rollout, to be restored a minute later.
func ironicHostIPs(o *observed) []string {
	d := o.deployments[render.Metal3Deployment]
	if len(o.ironicHostIPs) > 0 || d == nil || available(d) {
		return o.ironicHostIPs
	}
	if cfg := o.secrets[render.ICCConfigSecret]; cfg != nil {
		return render.ConfigAddresses(cfg.Data)
	}
	return nil
}

// platformObjects are the operator's own webhook certificate and configuration: they exist
// whenever the platform gets a stack and the operator serves its webhook, Provisioning object or
// not. Without the webhook server (--webhook-port=0) the configuration is removed: a webhook
// failing closed with nobody serving it would refuse every change of the Provisioning object.
func (p *plan) platformObjects(o *observed) error {
	if !o.serveWebhook {
		if w := o.webhookConfigs[render.CBOWebhookConfig]; w != nil && w.Labels[render.ComponentLabel] != "" {
			p.deletes = append(p.deletes, w)
		}
		return nil
	}
	data := p.planTLS(o, secrets.CBOWebhookCert, "cluster-baremetal-operator-webhook", render.ServiceSANs(o.namespace, render.CBOWebhookService))
	if data == nil {
		return errors.New("issuing the operator's webhook certificate failed")
	}
	p.webhookCert = data
	p.planObject(o, render.CBOWebhookConfiguration(o.namespace, data[secrets.KeyCA]), false)
	return nil
}

// planTLS keeps, issues or replaces a TLS Secret and returns its (new) data. A failure to issue
// (crypto/rand failing) leaves the data as it is.
func (p *plan) planTLS(o *observed, name, commonName string, sans []string) map[string][]byte {
	existing := o.secrets[name]
	var data map[string][]byte
	if existing != nil {
		data = existing.Data
	}
	decision := secrets.PlanTLS(data, sans, o.now)
	out, err := secrets.Apply(decision, data, commonName, sans, o.now)
	if err != nil {
		return data
	}
	if decision.Action != secrets.Keep {
		p.events.NormalAbout(secretRef(o, name), ReasonCertificateIssued, "Issue", "Issued a certificate in Secret "+name+": "+decision.Reason)
	}
	p.putSecret(o, existing, name, out)
	return out
}

// putSecret plans a Secret write when it is new, its data changed, or it lacks the component
// label (a Secret made by an earlier operator is adopted, never regenerated).
func (p *plan) putSecret(o *observed, existing *corev1.Secret, name string, data map[string][]byte) {
	if existing == nil {
		s := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.namespace, Labels: map[string]string{render.ComponentLabel: secretComponent}},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if name != secrets.CBOWebhookCert {
			setOwner(s, o.prov)
		}
		p.secretWrites = append(p.secretWrites, s)
		return
	}
	s := existing.DeepCopy()
	s.Labels = union(s.Labels, map[string]string{render.ComponentLabel: secretComponent})
	s.Data = data
	if name != secrets.CBOWebhookCert && o.prov != nil {
		desired := &corev1.Secret{}
		setOwner(desired, o.prov)
		mergeMetadata(s, desired)
	}
	if !equalSecret(s, existing) {
		p.secretWrites = append(p.secretWrites, s)
	}
}

func equalSecret(a, b *corev1.Secret) bool {
	return maps.Equal(a.Labels, b.Labels) && len(a.OwnerReferences) == len(b.OwnerReferences) &&
		maps.EqualFunc(a.Data, b.Data, func(x, y []byte) bool { return string(x) == string(y) })
}

// unusableSecret turns an unusable-credentials error into the InvalidConfiguration message ("" for
// other errors).
func unusableSecret(err error) string {
	if errors.Is(err, secrets.ErrCredentialsUnusable) {
		return err.Error() + ": delete the Secret to have new credentials generated"
	}
	return ""
}

// secretRef names a Secret of the stack as an event's related object.
func secretRef(o *observed, name string) *corev1.Secret {
	if s := o.secrets[name]; s != nil {
		return s
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: name}}
}
