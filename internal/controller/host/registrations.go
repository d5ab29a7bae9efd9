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

func (r *registrations) changed(uid types.UID, h provisioner.Host) bool {
	if r == nil {
		return true
	}
	fp, ok := r.m.Load(uid)
	return !ok || fp != registrationInputs(h)
}

func (r *registrations) record(uid types.UID, h provisioner.Host) {
	if r != nil {
		r.m.Store(uid, registrationInputs(h))
	}
}

func (r *registrations) forget(uid types.UID) {
	if r != nil {
		r.m.Delete(uid)
	}
}
