package v1beta1

// Condition types of a SpecialResource. Exactly one of them is True at a time, as in the
// special-resource-operator, so that `kubectl wait --for=condition=Ready` and the printer columns
// read the same way they did there.
const (
	// ConditionReady: every state of the recipe is applied and ready for every kernel among the
	// selected nodes.
	ConditionReady = "Ready"
	// ConditionProgressing: the operator is working, or waiting for something that will come
	// (a dependency, a build, pods, logs).
	ConditionProgressing = "Progressing"
	// ConditionErrored: something only a person can fix; the message names it.
	ConditionErrored = "Errored"
)

// Reasons of the SpecialResource conditions.
const (
	// ReasonSuccess (Ready): everything is applied and ready.
	ReasonSuccess = "Success"
	// ReasonHandlingState (Progressing): applying, or waiting for, the objects of a recipe state.
	ReasonHandlingState = "HandlingState"
	// ReasonWaitingForDependency (Progressing): a dependsOn SpecialResource is not Ready yet.
	ReasonWaitingForDependency = "WaitingForDependency"
	// ReasonWaitingForImage (Progressing): a kernel's driver image is being built, or the
	// registry could not be asked yet.
	ReasonWaitingForImage = "WaitingForImage"
	// ReasonMarkedForDeletion (Progressing): the SpecialResource is being deleted.
	ReasonMarkedForDeletion = "MarkedForDeletion"
	// ReasonInvalidSpec (Errored): the spec is invalid (bad template, unknown recipe, dependency
	// cycle...); the message names the field.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonDependencyCycle (Errored): dependsOn leads back to this SpecialResource.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonRecipeFailure (Errored): the recipe could not be read, rendered or applied.
	ReasonRecipeFailure = "RecipeFailure"
	// ReasonBuildFailed (Errored): a driver image build failed; the message names the kernel.
	ReasonBuildFailed = "BuildFailed"
	// ReasonImageMissing (Errored): a kernel has no image in the registry and no source to
	// build one from.
	ReasonImageMissing = "ImageMissing"
	// ReasonNamespaceConflict (Errored): spec.namespace is being deleted, or is owned by another
	// SpecialResource.
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonInternalError (Errored): an unexpected failure; details are in the operator's logs.
	ReasonInternalError = "InternalError"
)

// Finalizer keeps a SpecialResource until what it created is removed (the
// special-resource-operator's name).
const Finalizer = "sro.openshift.io/finalizer"

// DriverContainerRecipe is the built-in recipe: namespace objects, RBAC, the entrypoint
// ConfigMap and one driver DaemonSet per kernel.
const DriverContainerRecipe = "driver-container"

// Annotations understood on the objects of a recipe (names from the special-resource-operator).
const (
	// WaitAnnotation "true": the state is done only when this object is ready (DaemonSet: every
	// scheduled pod available and updated; Deployment, StatefulSet, Job, Pod, Namespace, CRD: the
	// kind's own readiness; anything else: exists).
	WaitAnnotation = "specialresource.openshift.io/wait"
	// WaitForLogsAnnotation "<regexp>" on a DaemonSet: the state is done only when the end of the
	// logs of each of its pods matches.
	WaitForLogsAnnotation = "specialresource.openshift.io/wait-for-logs"
	// KernelAffineAnnotation "true": the object is rendered once per kernel (name suffixed,
	// pods pinned to the kernel's nodes).
	KernelAffineAnnotation = "specialresource.openshift.io/kernel-affine"
	// HashAnnotation holds the hash of the rendered manifest; the object is written again only
	// when it changes.
	HashAnnotation = "specialresource.openshift.io/hash"
	// KernelAnnotation holds, on kernel-affine objects, the kernel version they serve.
	KernelAnnotation = "specialresource.openshift.io/kernel-version"
	// AppliedKindsAnnotation, on a SpecialResource (written by the operator): the kinds of the
	// objects it applied that may still exist ("apps/v1/Deployment,v1/Service"), so that objects
	// of a kind the recipe no longer renders are found and pruned.
	AppliedKindsAnnotation = "specialresource.openshift.io/applied-kinds"
	// LogsMatchedAnnotation "true", on a driver pod (written by the operator): the pod's log
	// matched its DaemonSet's wait-for-logs once. It is kept on the pod, not only in the operator's
	// memory: after a restart the end of the log may no longer show the line (a driver that kept
	// logging), and the state must not turn not-ready for it.
	LogsMatchedAnnotation = "specialresource.openshift.io/wait-for-logs-matched"
)

// Labels set by the operator.
const (
	// OwnedLabel marks every object the operator created for a SpecialResource; its value is the
	// SpecialResource's name (or, when longer than a label value allows, a hash of it).
	OwnedLabel = "specialresource.openshift.io/owned"
	// KernelLabel, on nodes: the node's kernel (status.nodeInfo.kernelVersion, as a label value).
	// On kernel-affine objects: the kernel they serve. Driver DaemonSets select nodes with it.
	KernelLabel = "specialresource.openshift.io/kernel-version.full"
	// StateLabelPrefix + "<specialresource>-<NNNN>" = "Ready", on nodes: that state of that
	// SpecialResource is ready for the node's current kernel (for later states and workloads to
	// select on).
	StateLabelPrefix = "specialresource.openshift.io/state-"
	// CreatedForLabel on a SpecialResource the operator created as a dependency: who needed it.
	CreatedForLabel = "specialresource.openshift.io/created-for"
	// NFDKernelLabel is node-feature-discovery's kernel label, used when a node reports no
	// kernel in its status.
	NFDKernelLabel = "feature.node.kubernetes.io/kernel-version.full"
)
