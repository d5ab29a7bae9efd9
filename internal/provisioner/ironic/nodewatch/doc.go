// Package nodewatch is the Ironic provisioner's node watcher and node cache.
//
// The node watcher replaces one GET per busy host per poll (metal3's way: 50 requests a second for
// 500 hosts at 10 s, each ~7 ms of Ironic's CPU) with one list of every node per round (~80 ms for
// 500 nodes with the fields the provisioner reads): a host's poll reads the list's copy of its node
// when that copy was taken after the provisioner's last write to the node (nodeCache). Each list is
// compared with what the provisioner saw before, and the hosts whose node changed state are sent on
// Changes, so the controller reconciles them at once instead of at their next poll: a host moves on
// within one list round of Ironic finishing a step. docs/ironic-notes.md ("The node watcher") has
// the measurements behind this.
//
// Without Run going (unit tests, or a provisioner used on its own) every poll is a GET, as before:
// a read then answers only the calls of one reconcile (Config.ReadTTL).
//
// The package knows nothing of Ironic's API beyond the node type: the provisioner passes the list
// request (Config.List), the node naming (Config.HostOf) and its clock (Config.Now), and tells the
// watcher about its own reads (Put, Saw) and writes (Writing).
//
// Files: watcher (the Watcher, what a poll may read, round timing), run (the list rounds, change
// notices), cache (the reads and when they were sent).
package nodewatch
