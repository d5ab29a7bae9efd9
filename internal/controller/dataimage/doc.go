// Package dataimage is the DataImage controller: a DataImage (metal3.io/v1alpha1) names a
// non-bootable ISO that the BareMetalHost of the same name gets as its virtual CD, for its
// operating system to read (configuration a provisioned host picks up at boot).
//
// The work is split as metal3 splits it, with one owner per decision: the host controller attaches
// and detaches the image at the only moment it may (a provisioned host off and about to be powered
// on: internal/controller/host/dataimage.go); this controller owns the rest: the owner reference to
// the host and the finalizer, the check of spec.url, a DataImage whose name matches no host, the
// status of an image ejected behind the operator's back, and deletion (a host that runs no
// operating system of ours, or is off, has its CD emptied at once; a running one keeps the image
// until its next power on, as metal3 does; a host gone, detached or no longer registered lets the
// DataImage go; a provisioner that cannot answer meanwhile is said in status.error, until it does).
package dataimage
