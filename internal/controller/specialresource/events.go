package specialresource

// Event reasons (CamelCase constants, emitted through events.List after the status write).
// Condition transitions use the condition's name (Ready, Progressing) or, for Errored, the
// reason.
const (
	reasonNamespaceCreated  = "NamespaceCreated"
	reasonDependencyCreated = "DependencyCreated"
	reasonBuildStarted      = "BuildStarted"
	reasonKernelAdded       = "KernelAdded"
	reasonKernelRemoved     = "KernelRemoved"
	reasonRemoved           = "Removed"
	// reasonNamespaceChanged: a move to another spec.namespace is done (move.go).
	reasonNamespaceChanged = "NamespaceChanged"
	// reasonPodsNotWaitedFor: deletion went on without waiting for pods on unreachable nodes.
	reasonPodsNotWaitedFor = "PodsNotWaitedFor"
)
