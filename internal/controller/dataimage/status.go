package dataimage

import metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"

// StatusBase is what a status write of after diffs against (patch.NewHelper): before, without its
// status.error when after changes it to another entry. The merge patch then carries the whole
// entry, count and message, which the CRD both requires. Two controllers write that entry (this
// one and the host controller); a patch of the one field that changed, applied just after the
// other controller removed the entry, would create an entry without the other field, which the
// API server refuses (422).
func StatusBase(before, after *metal3.DataImage) *metal3.DataImage {
	b, a := before.Status.Error, after.Status.Error
	if a == nil || (b != nil && *b == *a) {
		return before // unchanged, or removed (null needs no sibling)
	}
	base := before.DeepCopy()
	base.Status.Error = nil
	return base
}
