package provisioning

import (
	"encoding/json"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// AppliedSpecSecret keeps the last valid Provisioning spec the stack was planned from (key
// "spec", JSON). While the object's spec is invalid, the operator keeps maintaining the running
// stack from it: certificates renewed before they expire, the image-customization-controller
// following the metal3 pod to its new address, a deleted Deployment or Secret recreated, the pull
// secret copy following the cluster's, a new release's images rolled out. Without it "the last
// good stack keeps running" would hold only until the first of those came due (a certificate
// expires within a year). A Secret rather than a ConfigMap: the spec may quote URLs with
// credentials, and the operator already caches, owns and deletes the stack's Secrets.
const AppliedSpecSecret = "metal3-provisioning-applied"

const keyAppliedSpec = "spec"

// recordApplied plans the write of the spec the stack was just planned from (no write when it is
// the one recorded).
func (p *plan) recordApplied(o *observed) {
	data, err := json.Marshal(o.prov.Spec)
	if err != nil {
		return // a spec decoded from JSON encodes again
	}
	p.putSecret(o, o.secrets[AppliedSpecSecret], AppliedSpecSecret, map[string][]byte{keyAppliedSpec: data})
}

// lastApplied is o with the Provisioning spec the stack was last planned from in place of the
// object's own, or nil when none is recorded or the recorded one is not valid here any more (the
// platform's modes or the images file changed since).
func lastApplied(o *observed) *observed {
	s := o.secrets[AppliedSpecSecret]
	if s == nil || o.prov == nil {
		return nil
	}
	var spec metal3.ProvisioningSpec
	if err := json.Unmarshal(s.Data[keyAppliedSpec], &spec); err != nil {
		return nil
	}
	last := *o
	last.prov = o.prov.DeepCopy()
	last.prov.Spec = spec
	if invalid(&last) != "" {
		return nil
	}
	return &last
}
