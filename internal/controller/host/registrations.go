package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// registrations remembers, per host, a fingerprint of the spec-derived inputs of its last
// successful registration (memory only). A spec change that leaves them alone (the image, online,
// annotations' side effects...) then needs no new registration: without this, setting and
// removing an image cost every host two registrations, each a round of reads in the provisioner
// right when the host should start working. After an operator restart the memory is empty and
// each host registers once more on its first spec change, as before.
type registrations struct {
	m sync.Map // types.UID → string
	// adoptions are the hosts whose last adoption failed (see adoptionFailed).
	adoptions sync.Map // types.UID → struct{}
}

// registrationInputs fingerprints what Register brings in line on an enrolled host and the spec
// decides: BMC access, boot MAC, boot mode (checked against the BMC), disablePowerOff and the
// preprovisioning network data. What only enrollment uses (architecture, inspection and cleaning
// modes) is not in it, nor are credentials: credentialsChanged follows the Secret.
func registrationInputs(h provisioner.Host) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%q|%t|%q|%q|%t|%q",
		h.BMCAddress, h.DisableCertificateVerification, h.BootMACAddress, h.BootMode, h.DisablePowerOff,
		h.PreprovisioningNetworkData))
	return hex.EncodeToString(sum[:])
}

// differs compares h with the host's last successful registration; known is false when there is
// none to compare with (a new host, an operator restart).
func (r *registrations) differs(uid types.UID, h provisioner.Host) (changed, known bool) {
	if r == nil {
		return true, false
	}
	fp, ok := r.m.Load(uid)
	if !ok {
		return true, false
	}
	return fp != registrationInputs(h), true
}

func (r *registrations) record(uid types.UID, h provisioner.Host) {
	if r != nil {
		r.m.Store(uid, registrationInputs(h))
	}
}

// deferred records that the host's last registration was deferred by the provisioner (applied
// later, Result.RegistrationDeferred): a fingerprint no inputs have, so that the next reconcile
// registers again whatever the inputs.
func (r *registrations) deferred(uid types.UID) {
	if r != nil {
		r.m.Store(uid, "deferred")
	}
}

func (r *registrations) forget(uid types.UID) {
	if r != nil {
		r.m.Delete(uid)
		r.adoptions.Delete(uid)
	}
}

// setAdoptionFailed records whether the host's last adoption failed. An adoption failure and a
// registration failure share metal3's error type (provisioned registration error), and the error
// makes the host register again first: a successful registration must not clear an adoption's
// failure, or the adoption is asked again as new, never as a retry of the failed one, and the
// provisioner reports the same failure for ever (Ironic's "adopt failed" is left only by a new
// adopt request) with the count stuck at 1. Memory only: after a restart the first registration
// clears it once, and the next failed adoption is remembered again.
func (r *registrations) setAdoptionFailed(uid types.UID, failed bool) {
	if r == nil {
		return
	}
	if failed {
		r.adoptions.Store(uid, struct{}{})
	} else {
		r.adoptions.Delete(uid)
	}
}

// adoptionFailed: the host's last adoption failed (setAdoptionFailed).
func (r *registrations) adoptionFailed(uid types.UID) bool {
	if r == nil {
		return false
	}
	_, ok := r.adoptions.Load(uid)
	return ok
}
