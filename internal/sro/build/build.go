// Package build builds driver images when the registry does not have them, behind one small
// interface with two backends: OpenShift builds (build.openshift.io/v1 BuildConfig + Build, the
// seed's choice, used when the cluster serves that API) and, elsewhere, a Kubernetes Job running
// a kaniko executor (kernel-module-management's upstream choice).
//
// A build is named after its inputs (see Name): the same SpecialResource, kernel, image, source,
// build arguments and version always give the same name, so a reconcile that runs again finds
// its build instead of starting another, and a changed input starts a new one. A failed build is
// kept (its pod's logs say why) and not retried until an input changes or someone deletes it.
package build

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// BuildLabel marks build objects (with the kernel as value) so that pruning of a recipe's
// objects leaves them alone.
const BuildLabel = "specialresource.openshift.io/build"

// Request is one driver image build.
type Request struct {
	// Owner is the SpecialResource the image is for (owner of the build objects).
	Owner *sro.SpecialResource
	// Namespace and Name of the build objects (Name from the function Name).
	Namespace, Name string
	// Kernel the image is built for.
	Kernel string
	// Image is where the built image is pushed.
	Image string
	// Git is the source.
	Git sro.GitSource
	// BuildArgs are the rendered build arguments (KERNEL_FULL_VERSION and friends included).
	BuildArgs []sro.BuildArg
	// PushSecret names the pull/push Secret in Namespace ("" for none).
	PushSecret string
	// PushSecretKey is the key of PushSecret's docker config as the caller read the Secret
	// (image.ConfigKey): corev1.DockerConfigJsonKey, or corev1.DockerConfigKey for a legacy
	// kubernetes.io/dockercfg Secret, which Job builds refuse (ErrDockerConfigJSONNeeded). ""
	// when not known: the Secret is taken to have corev1.DockerConfigJsonKey.
	PushSecretKey string
	// Artifacts are mounted into the build where the backend can.
	Artifacts sro.DriverContainerArtifacts
}

// Phase is where a build is.
type Phase string

const (
	// Running: queued or running.
	Running Phase = "Running"
	// Succeeded: the image was pushed.
	Succeeded Phase = "Succeeded"
	// Failed: the build failed; Status.Message says why.
	Failed Phase = "Failed"
)

// Status is a build's state.
type Status struct {
	Phase   Phase
	Message string
}

// Builder starts builds and reports on them.
type Builder interface {
	// Start creates the build's objects (an existing one is left as it is). A request the
	// backend cannot build is refused before anything is created, with an error for which
	// Refused is true.
	Start(ctx context.Context, req Request) error
	// Status reports on the build namespace/name; found is false when there is none.
	Status(ctx context.Context, namespace, name string) (st Status, found bool, err error)
	// Delete removes a finished build's objects (a missing build is not an error).
	Delete(ctx context.Context, namespace, name string) error
	// Kind names the backend ("Job" or "Build") for messages and the watch.
	Kind() string
}

// Refused reports whether err is a backend's refusal of a request (ErrVolumesUnsupported,
// ErrDockerConfigJSONNeeded): nothing was created, and asking again cannot help until the
// SpecialResource or its pull Secret changes, so callers report it as the user's to fix (the
// message names the field) rather than as a failure to retry at once.
func Refused(err error) bool {
	return errors.Is(err, ErrVolumesUnsupported) || errors.Is(err, ErrDockerConfigJSONNeeded)
}

// Name is the name of the build of req's inputs: the SpecialResource, the kernel and a hash of
// everything the build is made from: what changes the image (image, source, build arguments,
// version) and what the build mounts (the pull Secret it pushes with, host paths, claims, the
// artifact images' pull Secrets and paths). A failed build is not started again under the same
// name, so a fix of any of these (a Secret that may push, a claim's name that was wrong and kept
// the build pod pending) must give another name. Inputs not set add nothing, so the names of
// builds that use none of the mounts did not change when they joined.
func Name(sr *sro.SpecialResource, kernel, image string, args []sro.BuildArg) string {
	dc := sr.Spec.DriverContainer
	inputs := []string{image, sr.Spec.Version}
	if g := dc.Source.Git; g != nil {
		inputs = append(inputs, g.URI, g.Ref)
	}
	for _, a := range args {
		inputs = append(inputs, a.Name+"="+a.Value)
	}
	if dc.PullSecret != "" {
		inputs = append(inputs, "pullSecret="+dc.PullSecret)
	}
	for _, h := range dc.Artifacts.HostPaths {
		inputs = append(inputs, "hostPath="+h.SourcePath+":"+h.DestinationDir)
	}
	for _, c := range dc.Artifacts.Claims {
		inputs = append(inputs, "claim="+c.Name+":"+c.MountPath)
	}
	for i, img := range dc.Artifacts.Images {
		if img.PullSecret != "" {
			inputs = append(inputs, fmt.Sprintf("image%d.pullSecret=%s", i, img.PullSecret))
		}
		for _, p := range img.Paths {
			inputs = append(inputs, fmt.Sprintf("image%d.path=%s:%s", i, p.SourcePath, p.DestinationDir))
		}
	}
	return naming.DNSLabel(sr.Name, "build", naming.Hash(kernel), naming.Hash(strings.Join(inputs, "\x00")))
}

// Args are the build arguments every build gets (as kernel-module-management sets them) followed
// by the SpecialResource's rendered ones, and ARTIFACT_IMAGE_<n> for each artifact image.
func Args(sr *sro.SpecialResource, kernel string) []sro.BuildArg {
	args := []sro.BuildArg{
		{Name: "KERNEL_FULL_VERSION", Value: kernel},
		{Name: "KERNEL_VERSION", Value: kernel},
		{Name: "MOD_NAME", Value: sr.Name},
		{Name: "MOD_NAMESPACE", Value: sr.TargetNamespace()},
	}
	if sr.Spec.Version != "" {
		args = append(args, sro.BuildArg{Name: "DRIVER_VERSION_SRO", Value: sr.Spec.Version})
	}
	args = append(args, sr.Spec.DriverContainer.BuildArgs...)
	for i, a := range sr.Spec.DriverContainer.Artifacts.Images {
		args = append(args, sro.BuildArg{Name: fmt.Sprintf("ARTIFACT_IMAGE_%d", i), Value: a.Name})
	}
	return args
}

// OpenShiftBuildGVK is the kind whose presence selects the OpenShift backend.
var OpenShiftBuildGVK = schema.GroupVersionKind{Group: "build.openshift.io", Version: "v1", Kind: "Build"}

// HasOpenShiftBuilds reports whether the cluster serves build.openshift.io/v1 Builds.
func HasOpenShiftBuilds(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(OpenShiftBuildGVK.GroupKind(), OpenShiftBuildGVK.Version)
	return err == nil
}

// Choose returns the backend for the cluster: OpenShift builds when served, Jobs otherwise.
func Choose(c client.Client, jobImage string) Builder {
	if HasOpenShiftBuilds(c.RESTMapper()) {
		return OpenShift{Client: c}
	}
	return Job{Client: c, Image: jobImage}
}

// labels are the labels of every build object.
func labels(req Request) map[string]string {
	return map[string]string{
		sro.OwnedLabel:  naming.OwnerValue(req.Owner.Name),
		BuildLabel:      naming.LabelValue(req.Kernel),
		sro.KernelLabel: naming.LabelValue(req.Kernel),
	}
}

// gitContext is the source as kaniko wants it: git://host/path#ref (kaniko clones it over https,
// or over http when the Job sets GIT_PULL_METHOD, which it does for an http:// source). kaniko fetches ref as a git
// reference, so a bare name is taken for a branch (refs/heads/<ref>): a tag must be written
// refs/tags/<tag> and a commit as its full 40-character id (the API's GitSource.Ref says so). Not
// guessed: a name can be a branch and a tag at once, and a short hex name a branch or a commit.
func gitContext(g sro.GitSource) string {
	uri := g.URI
	for _, scheme := range []string{"https://", "http://", "git://"} {
		uri = strings.TrimPrefix(uri, scheme)
	}
	ctx := "git://" + uri
	switch ref := g.Ref; {
	case ref == "":
	case strings.HasPrefix(ref, "refs/") || isCommit(ref):
		ctx += "#" + ref
	default:
		ctx += "#refs/heads/" + ref
	}
	return ctx
}

func isCommit(ref string) bool {
	return len(ref) == 40 && !slices.ContainsFunc([]byte(ref), func(c byte) bool {
		return (c < '0' || c > '9') && (c < 'a' || c > 'f')
	})
}
