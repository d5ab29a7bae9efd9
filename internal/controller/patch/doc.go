// Package patch writes what a reconcile changed, once, and tells a reconcile when its cached copy
// is older than the controller's own last write. It is shared by every controller in the project,
// in the spirit of cluster-api's patch helper (without importing cluster-api).
//
// A controller snapshots the object after reading it and ensuring its finalizer (NewHelper), lets
// its phases edit the object in memory, and ends the reconcile with one PatchStatus: a JSON merge
// patch carrying only the status fields that changed, skipped when nothing did. Metadata (labels,
// annotations, finalizers) goes through PatchMetadata / Metadata: a merge patch with an optimistic
// lock, since those lists are shared with other controllers. A Tracker remembers the
// resourceVersion of each write so that a reconcile woken before the informer caught up returns
// instead of redoing work (see Tracker).
//
// Files: patch.go the Helper and its status write; compare.go how a status change is found (field
// by field, the JSON merge patch where that cannot tell); metadata.go metadata patches;
// tracker.go the Tracker.
package patch
