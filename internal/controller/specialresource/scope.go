package specialresource

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// scope is what the phases of one reconcile share: the SpecialResource (a copy the driver diffs
// against its snapshot), what the phases read, and what they ask the driver to write.
type scope struct {
	ctx context.Context
	cfg *Config
	sr  *sro.SpecialResource
	// now is the reconcile's time, truncated to seconds as the API stores it.
	now metav1.Time
	in  inputs
	fx  effects
	// plan is the result of the plan phase (nil until it ran).
	plan *planResult
}

// inputs are what the phases read.
type inputs struct {
	recipe    *recipe.Recipe
	namespace string
	// kernels are the selected nodes grouped by kernel, sorted by kernel.
	kernels []kernelGroup
	// nodesMatching counts the selected nodes; nodesNoKernel those reporting no kernel.
	nodesMatching, nodesNoKernel int
	// allNodes are every node's name and labels (to remove state labels from nodes that are no
	// longer selected).
	allNodes []nodeLabels
	// nodesListed: kernels, nodesMatching, nodesNoKernel and allNodes are set (listNodes).
	nodesListed bool
	// images is the image of each kernel.
	images map[string]kernelImage
	// imageProblem is, naming the field, what in the user's input kept a kernel's image from
	// being looked up (the pull Secret missing, malformed, or refused by the registry; the image
	// not a valid reference for the kernel); that kernel's image is Unknown, and the
	// SpecialResource Errored with it.
	imageProblem string
	// deps are what templates see of the dependencies; depImages their images by kernel.
	deps      map[string]recipe.Dependency
	depImages map[string]map[string]string
	// firstPass is the SpecialResource rendered (first pass) for each kernel.
	firstPass map[string]*sro.SpecialResource
	// clusterVersion is the OpenShift (or Kubernetes) version.
	clusterVersion string
	// rendered are the recipe's states, decorated (owner, labels, namespace, hash), but for the
	// objects of unserved.
	rendered []recipe.RenderedState
	// unserved are the rendered objects whose kind the cluster did not serve at render time (a
	// CRD an earlier state installs, not applied or established yet), with why: not decorated,
	// they are neither read nor applied in this reconcile (plan decides what they wait for).
	unserved map[objKey]string
	// affine[i]: the recipe's state i has kernel-affine manifests (set only when no kernel was
	// rendered; otherwise the rendered states say it).
	affine []bool
	// observed are the existing copies of the rendered objects (from the cache).
	observed map[objKey]*unstructured.Unstructured
	// stale: the observed copy is older than our last write of it.
	stale map[objKey]bool
	// logs says, for each wait-for-logs object, whether every pod's log matched.
	logs map[objKey]logState
	// owned are the objects labelled as ours, for pruning (but those of oldNamespaces: left).
	owned []*unstructured.Unstructured
	// oldNamespaces are the namespaces a change of spec.namespace left, where objects of ours
	// may remain (move.go), and left our objects there: the move removes them, in deletion's
	// order, not the plan's pruning. oldNamespacesRead: the objects phase looked for them.
	oldNamespaces     []string
	left              []*unstructured.Unstructured
	oldNamespacesRead bool
	// driverPods[k] are the nodes where kernel k's driver serves (servedOn).
	driverPods map[string]map[string]bool
	// heldDrivers[k] is the driver DaemonSet of a kernel not rendered this time (planInput).
	heldDrivers map[string]*unstructured.Unstructured
}

// kernelGroup is the selected nodes that run one kernel.
type kernelGroup struct {
	kernel string
	nodes  []string
	// labelled counts the nodes whose kernel label already names this kernel (the nodekernel
	// controller writes it; driver pods are scheduled by it).
	labelled int
	// nodeLabels are the labels of osNode, the node the operating-system values come from
	// (node-feature-discovery labels, or the kernel): see kernel.OSSourceBefore.
	osNode     string
	nodeLabels map[string]string
}

// nodeLabels is a node's name and labels.
type nodeLabels struct {
	name   string
	kernel string
	labels map[string]string
	// resourceVersion of the cached copy.
	resourceVersion string
}

// kernelImage is what the images phase found for a kernel.
type kernelImage struct {
	image   string
	state   sro.ImageState
	message string
	// build is the name of the build that makes image ("" when no image is used).
	build string
	// blocked: the user's input keeps the image from being looked up (the pull Secret missing,
	// malformed, or refused by the registry; the image not a valid reference). Its state is
	// Unknown, but waiting will not change it, unlike a registry that cannot be reached.
	blocked bool
	// unconfirmed: the build succeeded but the registry does not show the image (pullorbuild's
	// Unconfirmed): BuildFailed, but perhaps only a registry that has not caught up yet, so
	// neither reported nor counted as a failed build, and looked at again (decide).
	unconfirmed bool
}

// failed reports whether the image cannot come without the user: its build failed, it is missing
// with nothing to build it from, or it cannot be looked up (blocked). An image being built or
// looked up (a registry that cannot be reached), or whose pushed image the registry does not show
// yet (unconfirmed), comes by itself, or fails. A refused build shows as Building here: the
// builder says so only when asked to start it (effects.refusedBuilds).
func (ki kernelImage) failed() bool {
	return (ki.state == sro.ImageBuildFailed && !ki.unconfirmed) || ki.state == sro.ImageMissing || (ki.state == sro.ImageUnknown && ki.blocked)
}

// logState is what the logs of a wait-for-logs DaemonSet's pods say.
type logState struct {
	matched, pods int
}

// objKey identifies an object of any kind.
type objKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func keyOf(u *unstructured.Unstructured) objKey {
	return objKey{gvk: u.GroupVersionKind(), namespace: u.GetNamespace(), name: u.GetName()}
}

// effects are what the phases decided that needs writing; the driver writes them in order.
type effects struct {
	createNamespace *corev1.Namespace
	createDeps      []dependencyToCreate
	startBuilds     []build.Request
	// refusedBuilds are the kernels whose build the builder refused (write), with why: their
	// image is Missing, not Building.
	refusedBuilds map[string]string
	deleteBuilds  []string
	// logsMatched are the pods whose log matched their wait-for-logs in this reconcile, to be
	// marked with sro.LogsMatchedAnnotation.
	logsMatched   []types.NamespacedName
	events        events.List
	buildsStarted int
	buildsFailed  int
	// leaveOld: the move phase ran with oldNamespaces to leave: write removes what is left there
	// (leaveOldNamespaces), and hold, too, keeps their objects out of owned. movedOut: nothing
	// of ours is left there, so status.namespace may name spec.namespace.
	leaveOld, movedOut bool
}

// dependencyToCreate is a missing dependency to create, and the dependsOn field its spec comes
// from (for the message when the API server refuses it).
type dependencyToCreate struct {
	sr    *sro.SpecialResource
	field string
}

// outcome is how a reconcile ends: the condition that is True, its reason and message, the
// status.state, and when to look again (0: only when something changes).
type outcome struct {
	condition string
	reason    string
	message   string
	state     string
	after     time.Duration
}

func ready() outcome {
	return outcome{condition: sro.ConditionReady, reason: sro.ReasonSuccess, message: "every state is ready on every kernel", state: "Ready"}
}

func progressing(reason, message, state string, after time.Duration) outcome {
	return outcome{condition: sro.ConditionProgressing, reason: reason, message: message, state: state, after: after}
}

func errored(reason, message string, after time.Duration) outcome {
	return outcome{condition: sro.ConditionErrored, reason: reason, message: message, state: "Errored", after: after}
}
