package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpecialResourceSpec says which kernel driver to deliver to which nodes, and how.
type SpecialResourceSpec struct {
	// Namespace is where the driver's objects live (default: the SpecialResource's name). When
	// it does not exist the operator creates it, owns it and deletes it with the SpecialResource;
	// a namespace that already exists is used and never deleted.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// NodeSelector selects the nodes that have the hardware (for example a
	// feature.node.kubernetes.io/pci-<vendor>.present label). Empty: every node.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Configuration is free key/values for the recipe's templates
	// ({{.SpecialResource.Spec.Configuration}}).
	// +optional
	Configuration []SpecialResourceConfiguration `json:"configuration,omitempty"`

	// DriverContainer describes the container that loads the driver on each node.
	// +optional
	DriverContainer SpecialResourceDriverContainer `json:"driverContainer,omitempty"`

	// DependsOn names SpecialResources that must be Ready before this one starts (for modules
	// that need another module's symbols). A missing one is created from its recipe.
	// +optional
	DependsOn []SpecialResourceDependency `json:"dependsOn,omitempty"`

	// Recipe is the set of manifests the operator renders and applies, state by state. Default:
	// the built-in "driver-container" recipe.
	// +optional
	Recipe SpecialResourceRecipe `json:"recipe,omitempty"`

	// Version is the driver's version. Changing it rolls the driver out again (and, when the
	// image template uses it, pulls or builds a new image).
	// +optional
	Version string `json:"version,omitempty"`
}

// SpecialResourceConfiguration is one configuration entry.
type SpecialResourceConfiguration struct {
	// Name of the entry.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value holds the entry's values; each may use template variables.
	// +optional
	Value []string `json:"value,omitempty"`
}

// SpecialResourceDriverContainer is the driver container: its image per kernel, how to build it,
// and how it runs.
type SpecialResourceDriverContainer struct {
	// Image is the driver image as a template, rendered once per kernel, for example
	// registry.example/vendor-kmod:{{.KernelFullVersion}}. Used for kernels that no
	// kernelMappings entry matches.
	// +optional
	Image string `json:"image,omitempty"`

	// KernelMappings map kernels to images: the first entry whose literal equals the kernel, or
	// whose regexp matches it, gives the image (a template too). Kernels that none matches use
	// image; with no image either, such kernels are not served (and reported).
	// +optional
	KernelMappings []KernelMapping `json:"kernelMappings,omitempty"`

	// Modules are the kernel modules the built-in recipe loads, in this order, when its driver
	// container starts, and unloads in reverse order when it stops (only if the node still runs
	// the kernel they were loaded into).
	// +optional
	Modules []string `json:"modules,omitempty"`

	// PullSecret names a Secret (kubernetes.io/dockerconfigjson) in spec.namespace: it is used to
	// look images up in the registry, to pull the driver image and to push built images.
	// +optional
	PullSecret string `json:"pullSecret,omitempty"`

	// Source is where to build the image from when the registry does not have it.
	// +optional
	Source DriverContainerSource `json:"source,omitempty"`

	// BuildArgs are passed to the build (values may use template variables, rendered per kernel).
	// +optional
	BuildArgs []BuildArg `json:"buildArgs,omitempty"`

	// RunArgs are passed to the driver container as environment variables.
	// +optional
	RunArgs []RunArg `json:"runArgs,omitempty"`

	// Artifacts are what builds need from elsewhere: host paths, other images, volumes.
	// +optional
	Artifacts DriverContainerArtifacts `json:"artifacts,omitempty"`
}

// KernelMapping maps kernels to an image. Exactly one of literal and regexp is set.
type KernelMapping struct {
	// Literal is a kernel version, matched exactly.
	// +optional
	Literal string `json:"literal,omitempty"`
	// Regexp is a regular expression (Go syntax) matched against the whole kernel version.
	// +optional
	Regexp string `json:"regexp,omitempty"`
	// Image is the image template for the kernels this entry matches.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
}

// DriverContainerSource is the source of a driver container build.
type DriverContainerSource struct {
	// Git is a git repository holding a Dockerfile (Containerfile) at its root.
	// +optional
	Git *GitSource `json:"git,omitempty"`
}

// GitSource is a git repository and revision.
type GitSource struct {
	// URI of the repository.
	// +kubebuilder:validation:MinLength=1
	URI string `json:"uri"`
	// Ref is the branch, tag or commit (default: the repository's default branch). OpenShift
	// builds take it as given. Job (kaniko) builds fetch it as a git reference, where a bare
	// name is a branch: write a tag as refs/tags/<tag> and a commit as its full 40-character id.
	// +optional
	Ref string `json:"ref,omitempty"`
}

// BuildArg is a build argument.
type BuildArg struct {
	// Name of the argument.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the argument (may use template variables).
	// +optional
	Value string `json:"value,omitempty"`
}

// RunArg is a setting passed to the driver container.
type RunArg struct {
	// Name of the setting (an environment variable name).
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the setting (may use template variables).
	// +optional
	Value string `json:"value,omitempty"`
}

// DriverContainerArtifacts are build inputs from outside the source repository.
type DriverContainerArtifacts struct {
	// HostPaths are mounted into build pods (Job builds only: OpenShift builds cannot mount
	// volumes).
	// +optional
	HostPaths []HostPathArtifact `json:"hostPaths,omitempty"`
	// Images are other images whose files the build copies (passed to the build as build
	// arguments ARTIFACT_IMAGE_<n>, and to recipes).
	// +optional
	Images []ImageArtifact `json:"images,omitempty"`
	// Claims are PersistentVolumeClaims of spec.namespace mounted into build pods (Job builds
	// only).
	// +optional
	Claims []ClaimArtifact `json:"claims,omitempty"`
}

// HostPathArtifact is a directory of the host made available to a build.
type HostPathArtifact struct {
	// SourcePath on the host.
	// +kubebuilder:validation:MinLength=1
	SourcePath string `json:"sourcePath"`
	// DestinationDir in the build.
	// +kubebuilder:validation:MinLength=1
	DestinationDir string `json:"destinationDir"`
}

// ImageArtifact is an image whose files a build uses.
type ImageArtifact struct {
	// Name is the image (a template).
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Kind of reference: DockerImage (default) or ImageStreamTag.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Namespace of an ImageStreamTag.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// The JSON names of the next two fields (pullsecret, path) are the special-resource-operator's
	// (SpecialResourceImages), so that its SpecialResources keep their meaning here.

	// PullSecret to pull the image.
	// +optional
	PullSecret string `json:"pullsecret,omitempty"`
	// Paths to copy from the image.
	// +optional
	Paths []HostPathArtifact `json:"path,omitempty"`
}

// ClaimArtifact is a PersistentVolumeClaim mounted into builds.
type ClaimArtifact struct {
	// Name of the claim.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// MountPath in the build.
	// +kubebuilder:validation:MinLength=1
	MountPath string `json:"mountPath"`
}

// SpecialResourceDependency names a SpecialResource that must be Ready first.
type SpecialResourceDependency struct {
	// Name of the SpecialResource.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// ImageReference "true": this SpecialResource uses the dependency's image (as a build base,
	// say); the dependency's image for each kernel is then given to the templates.
	// +optional
	// +kubebuilder:validation:Enum="";"true";"false"
	ImageReference string `json:"imageReference,omitempty"`
	// Recipe creates the dependency when no SpecialResource of that name exists: from the
	// recipe's specialresource.yaml when it has one, else with this recipe and the defaults.
	// +optional
	Recipe *SpecialResourceRecipe `json:"recipe,omitempty"`
}

// SpecialResourceRecipe says where the manifests come from: a built-in recipe or a ConfigMap.
// At most one is set; neither means the built-in "driver-container" recipe.
type SpecialResourceRecipe struct {
	// Name of a built-in recipe ("driver-container").
	// +optional
	Name string `json:"name,omitempty"`
	// ConfigMap holding the recipe: one key per state, named NNNN-<name>.yaml (run in key order),
	// each a Go template of one or more YAML manifests.
	// +optional
	ConfigMap *RecipeConfigMap `json:"configMap,omitempty"`
}

// RecipeConfigMap is a ConfigMap holding a recipe.
type RecipeConfigMap struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
}

// ImageState is what the operator knows of a kernel's driver image.
// +kubebuilder:validation:Enum=Exists;Building;BuildFailed;Missing;Unknown
type ImageState string

const (
	// ImageExists: the registry has the image.
	ImageExists ImageState = "Exists"
	// ImageBuilding: the registry does not have it and a build is running.
	ImageBuilding ImageState = "Building"
	// ImageBuildFailed: the build failed; see the message.
	ImageBuildFailed ImageState = "BuildFailed"
	// ImageMissing: the registry does not have it and there is no source to build it from,
	// or the builder refused to build it from this spec (the message says why).
	ImageMissing ImageState = "Missing"
	// ImageUnknown: not checked yet, or the registry could not be asked.
	ImageUnknown ImageState = "Unknown"
)

// KernelStatus is how one kernel version among the selected nodes is served.
type KernelStatus struct {
	// KernelVersion as the nodes report it (status.nodeInfo.kernelVersion).
	KernelVersion string `json:"kernelVersion"`
	// Nodes is how many selected nodes run this kernel.
	Nodes int32 `json:"nodes"`
	// ClusterVersion is the cluster version this kernel's templates are rendered with: the
	// cluster's version when the kernel was first seen, kept through later upgrades, so that an
	// upgrade does not change the image of a kernel nodes still run (old SRO rendered each kernel
	// with its own release's version too).
	// +optional
	ClusterVersion string `json:"clusterVersion,omitempty"`
	// Image is the driver image for this kernel.
	// +optional
	Image string `json:"image,omitempty"`
	// ImageState says whether the image exists, is being built, or failed.
	// +optional
	ImageState ImageState `json:"imageState,omitempty"`
	// DaemonSet is the name of this kernel's driver DaemonSet.
	// +optional
	DaemonSet string `json:"daemonSet,omitempty"`
	// Available is how many of this kernel's nodes run an available driver pod.
	Available int32 `json:"available"`
	// Message says what this kernel waits for, or what failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// Kernel is the entry of kernel k, or nil.
func (st *SpecialResourceStatus) Kernel(k string) *KernelStatus {
	for i := range st.Kernels {
		if st.Kernels[i].KernelVersion == k {
			return &st.Kernels[i]
		}
	}
	return nil
}

// SpecialResourceStatus is what the operator observed and did.
type SpecialResourceStatus struct {
	// State is the recipe state being worked on (for example "1000-driver-container"), or
	// "Ready" (kept from the special-resource-operator; the conditions say more).
	// +optional
	State string `json:"state,omitempty"`
	// Namespace is the namespace in use (spec.namespace or its default).
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// NodesMatching is how many nodes the nodeSelector selects.
	// +optional
	NodesMatching int32 `json:"nodesMatching,omitempty"`
	// NodesServed is how many of them run an available driver pod for their current kernel.
	// +optional
	NodesServed int32 `json:"nodesServed,omitempty"`
	// Kernels lists every kernel among the selected nodes.
	// +optional
	// +listType=map
	// +listMapKey=kernelVersion
	Kernels []KernelStatus `json:"kernels,omitempty"`
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ReadyGeneration is the last generation the SpecialResource was Ready at: Progressing at that
	// generation is a driver pod coming up on a rebooted or new node, not a rollout of the spec
	// (the ClusterOperator's Progressing counts only rollouts, as OpenShift asks).
	// +optional
	ReadyGeneration int64 `json:"readyGeneration,omitempty"`
	// Conditions: Ready, Progressing and Errored; exactly one of them is True.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SpecialResource delivers an out-of-tree kernel driver, as a container, to the nodes that have
// the hardware: one DaemonSet per kernel version among those nodes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sr
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].status`
// +kubebuilder:printcolumn:name="Errored",type=string,JSONPath=`.status.conditions[?(@.type=="Errored")].status`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodesServed`,description="Nodes running an available driver pod"
// +kubebuilder:printcolumn:name="Kernels",type=string,JSONPath=`.status.kernels[*].kernelVersion`,priority=1
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SpecialResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SpecialResourceSpec   `json:"spec,omitempty"`
	Status SpecialResourceStatus `json:"status,omitempty"`
}

// SpecialResourceList is a list of SpecialResources.
// +kubebuilder:object:root=true
type SpecialResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpecialResource `json:"items"`
}

func init() { register(&SpecialResource{}, &SpecialResourceList{}) }

// TargetNamespace is spec.namespace, or the SpecialResource's name when it is empty.
func (sr *SpecialResource) TargetNamespace() string {
	if sr.Spec.Namespace != "" {
		return sr.Spec.Namespace
	}
	return sr.Name
}

// RecipeOrDefault is spec.recipe, or the built-in driver-container recipe when none is given.
func (sr *SpecialResource) RecipeOrDefault() SpecialResourceRecipe {
	if sr.Spec.Recipe.Name == "" && sr.Spec.Recipe.ConfigMap == nil {
		return SpecialResourceRecipe{Name: DriverContainerRecipe}
	}
	return sr.Spec.Recipe
}

// PullSecretRef is the pull Secret as a local reference list for pod specs (nil when none).
func (sr *SpecialResource) PullSecretRef() []corev1.LocalObjectReference {
	if sr.Spec.DriverContainer.PullSecret == "" {
		return nil
	}
	return []corev1.LocalObjectReference{{Name: sr.Spec.DriverContainer.PullSecret}}
}
