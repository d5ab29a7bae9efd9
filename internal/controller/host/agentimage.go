package host

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/statustext"
)

// The host's PreprovisioningImage (--build-preprov-image, seed 002): the agent image an image
// builder makes for this host (its network data built in). The pure decisions live here: what the
// image's spec must be, whether a built image is usable for it (metal3's preprovImageAvailable,
// with a message for every reason it is not), and what the driver must write. The state rows say
// when the image is needed (states.go, agentImage); agentimage_write.go reads and writes it.

// reasonWaitingForImage is the Progressing reason while a host waits for its image; the
// condition's lastTransitionTime says since when, and so does the message.
const reasonWaitingForImage = "WaitingForPreprovisioningImage"

// imageErrorPrefix starts every host error that comes from the image. The image's error is bad
// input like a missing Secret (the host waits for it to be fixed, level-triggered): re-registering
// cannot fix it, so registration leaves it alone (imageErrorShown).
const imageErrorPrefix = "PreprovisioningImage "

// imageArchitecture: spec.architecture, else the inspected CPU, else the operator's own (metal3).
func imageArchitecture(h *metal3.BareMetalHost) string {
	switch {
	case h.Spec.Architecture != "":
		return h.Spec.Architecture
	case h.Status.HardwareDetails != nil && h.Status.HardwareDetails.CPU.Arch != "":
		return h.Status.HardwareDetails.CPU.Arch
	}
	return provisioner.ControllerArchitecture
}

// imageSpec is the spec the host's image must have.
func imageSpec(h *metal3.BareMetalHost, formats []metal3.ImageFormat) metal3.PreprovisioningImageSpec {
	return metal3.PreprovisioningImageSpec{
		NetworkDataName: h.Spec.PreprovisioningNetworkDataName,
		Architecture:    imageArchitecture(h),
		AcceptFormats:   slices.Clone(formats),
	}
}

// imageCheck is what the host's image allows now: use it (ready), wait (waiting says for what),
// or report its error (err, a host error message starting with imageErrorPrefix).
type imageCheck struct {
	ready   *provisioner.PreprovisioningImage
	waiting string
	err     string
}

// checkImage is metal3's preprovImageAvailable, for the image as the driver will leave it: ppi is
// the stored image of the host (nil: none), want the spec it must have, networkVersion the
// resourceVersion of the network data Secret ("" when it is missing). A missing image or an
// outdated spec is written by this reconcile, so the host waits for the build. An Error condition
// of the current generation is the image builder's verdict and wins over everything but
// ownership and an outdated spec.
func checkImage(h *metal3.BareMetalHost, ppi *metal3.PreprovisioningImage, want metal3.PreprovisioningImageSpec, networkVersion string) imageCheck {
	name := fmt.Sprintf("PreprovisioningImage %q", h.Name)
	// One message for an image not built yet, whether it is written in this reconcile or was
	// before: the host's status does not change (no write) while the build goes on.
	building := imageCheck{waiting: "the image builder to build " + name + " " + wantedImage(want)}
	if ppi == nil {
		return building
	}
	if owner := metav1.GetControllerOf(ppi); owner != nil && owner.UID != h.UID {
		return imageCheck{waiting: name + " to be deleted: it belongs to another " + owner.Kind}
	}
	if !ppi.DeletionTimestamp.IsZero() {
		return imageCheck{waiting: name + " to finish deleting (it is then created again)"}
	}
	if !equality.Semantic.DeepEqual(ppi.Spec, want) {
		return building
	}
	st := ppi.Status
	if c := conditions.Get(st.Conditions, string(metal3.ConditionImageError)); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == ppi.Generation {
		msg := sanitizeMessage(c.Message)
		if msg == "" {
			msg = "no message"
		}
		return imageCheck{err: fmt.Sprintf("%s%q could not be built (%s): %s", imageErrorPrefix, h.Name, c.Reason, msg)}
	}
	if !conditions.IsCurrent(st.Conditions, string(metal3.ConditionImageReady), ppi.Generation) {
		return building
	}
	switch {
	case st.Architecture != want.Architecture:
		return imageCheck{waiting: fmt.Sprintf("the image builder to rebuild %s for architecture %s (it is built for %q)", name, want.Architecture, st.Architecture)}
	case !slices.Contains(want.AcceptFormats, st.Format):
		return imageCheck{waiting: fmt.Sprintf("the image builder to rebuild %s as %s (it is built as %q)", name, formatList(want.AcceptFormats), st.Format)}
	case st.NetworkData.Name != want.NetworkDataName:
		return imageCheck{waiting: fmt.Sprintf("the image builder to rebuild %s with network data Secret %q (it is built with %q)", name, want.NetworkDataName, st.NetworkData.Name)}
	case want.NetworkDataName != "" && networkVersion == "":
		return imageCheck{waiting: fmt.Sprintf("network data Secret %q (spec.preprovisioningNetworkDataName) to exist", want.NetworkDataName)}
	case want.NetworkDataName != "" && versionBefore(st.NetworkData.Version, networkVersion):
		return imageCheck{waiting: fmt.Sprintf("the image builder to rebuild %s with the current network data (Secret %q is at version %s, the image has version %s)",
			name, want.NetworkDataName, networkVersion, st.NetworkData.Version)}
	case st.ImageURL == "":
		return imageCheck{waiting: fmt.Sprintf("the image builder to publish the URL of %s", name)}
	}
	return imageCheck{ready: &provisioner.PreprovisioningImage{
		ImageURL: st.ImageURL, KernelURL: st.KernelURL, ExtraKernelParams: st.ExtraKernelParams, Format: st.Format,
	}}
}

// versionBefore: the image was built from an older version of the network data Secret than the
// host sees. A newer one is fine: the builder read the Secret after the host's cache did (an
// image builder may label the Secret or add itself as an owner, which changes its version, a
// change the host is not woken for). resourceVersions are compared as numbers (etcd revisions);
// unparsable ones must be equal.
func versionBefore(built, current string) bool {
	if built == current {
		return false
	}
	b, errB := strconv.ParseUint(built, 10, 64)
	c, errC := strconv.ParseUint(current, 10, 64)
	return errB != nil || errC != nil || b < c
}

// wantedImage describes a spec for a waiting message: "(iso or initrd, x86_64, network data Secret "n")".
func wantedImage(want metal3.PreprovisioningImageSpec) string {
	parts := []string{formatList(want.AcceptFormats), want.Architecture}
	if want.NetworkDataName != "" {
		parts = append(parts, fmt.Sprintf("network data Secret %q", want.NetworkDataName))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func formatList(formats []metal3.ImageFormat) string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	return strings.Join(names, " or ")
}

// imageWrite is what the driver writes to the host's image: at most one of create, update (patch
// from before to the object) and remove.
type imageWrite struct {
	create *metal3.PreprovisioningImage
	before *metal3.PreprovisioningImage
	update *metal3.PreprovisioningImage
	remove *metal3.PreprovisioningImage
}

func (w imageWrite) empty() bool { return w.create == nil && w.update == nil && w.remove == nil }

// planImage decides the write for a host whose current state uses its image as use: delete it
// when the host is done with the agent; create it, or bring its spec, labels (added or changed,
// never removed: others may label it too, as metal3 does) and controller reference up to date,
// when it is needed. An image another object controls, or one being deleted, is left alone, but
// for metal3's host finalizer, which is taken off a deleting image the host controls.
func planImage(h *metal3.BareMetalHost, ppi *metal3.PreprovisioningImage, use imageUse, want metal3.PreprovisioningImageSpec) imageWrite {
	if ppi != nil && !ppi.DeletionTimestamp.IsZero() && controlledBy(ppi, h) &&
		slices.Contains(ppi.Finalizers, metal3.HostPreprovisioningImageFinalizer) {
		// Deleted under a metal3 baremetal-operator that ran before this one, which held it with
		// its host finalizer (see dropHostFinalizer): released, so that it goes and the host's
		// next image can be made.
		return imageWrite{before: ppi, update: withoutHostFinalizer(ppi)}
	}
	if use == imageDeleted {
		if ppi != nil && ppi.DeletionTimestamp.IsZero() && controlledBy(ppi, h) {
			return imageWrite{remove: ppi}
		}
		return imageWrite{}
	}
	if !use.needed() {
		return imageWrite{}
	}
	if ppi == nil {
		return imageWrite{create: &metal3.PreprovisioningImage{
			ObjectMeta: metav1.ObjectMeta{
				Name: h.Name, Namespace: h.Namespace, Labels: maps.Clone(h.Labels),
				OwnerReferences: []metav1.OwnerReference{ownerRef(h)},
			},
			Spec: want,
		}}
	}
	owner := metav1.GetControllerOf(ppi)
	if (owner != nil && owner.UID != h.UID) || !ppi.DeletionTimestamp.IsZero() {
		return imageWrite{}
	}
	next := ppi.DeepCopy()
	next.Spec = want
	if len(h.Labels) > 0 && next.Labels == nil {
		next.Labels = map[string]string{}
	}
	maps.Copy(next.Labels, h.Labels)
	if owner == nil {
		next.OwnerReferences = append(next.OwnerReferences, ownerRef(h)) // adopt an image made before the host
	}
	if equality.Semantic.DeepEqual(next, ppi) {
		return imageWrite{}
	}
	return imageWrite{before: ppi, update: next}
}

func withoutHostFinalizer(ppi *metal3.PreprovisioningImage) *metal3.PreprovisioningImage {
	next := ppi.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == metal3.HostPreprovisioningImageFinalizer })
	return next
}

func controlledBy(ppi *metal3.PreprovisioningImage, h *metal3.BareMetalHost) bool {
	owner := metav1.GetControllerOf(ppi)
	return owner != nil && owner.UID == h.UID
}

// imageErrorShown: the host's error is its image's (see imageErrorPrefix).
func imageErrorShown(st *metal3.BareMetalHostStatus) bool {
	return (st.ErrorType == metal3.RegistrationError || st.ErrorType == metal3.ProvisionedRegistrationError || st.ErrorType == metal3.ServicingError) &&
		strings.HasPrefix(st.ErrorMessage, imageErrorPrefix)
}

// messageLimit caps text from other controllers in the host's status.
const messageLimit = 500

// sanitizeMessage makes text from another controller (an image builder's condition message) fit
// for the host's status: statustext's cleaning (credentials in URLs, one line, at most
// messageLimit bytes).
func sanitizeMessage(msg string) string { return statustext.Clean(msg, messageLimit) }

// waitingSince renders the time a wait started for the Progressing message.
func waitingSince(t time.Time) string { return t.UTC().Format(time.RFC3339) }
