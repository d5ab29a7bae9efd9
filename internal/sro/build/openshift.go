package build

import (
	"context"
	"errors"
	"fmt"
	"strings"

	buildv1 "github.com/openshift/api/build/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// OpenShift builds with build.openshift.io/v1: a BuildConfig (Docker strategy, git source, the
// build arguments, output pushed with the pull Secret; no triggers, so that the operator alone
// decides when to build) and a Build of it. Host paths and claims cannot be mounted into
// OpenShift builds (the seed notes BuildConfigs do not support volumes): a request with them is
// refused with a message saying so.
type OpenShift struct {
	Client client.Client
}

// Kind is "Build".
func (OpenShift) Kind() string { return "Build" }

// ErrVolumesUnsupported is returned for artifacts OpenShift builds cannot mount.
var ErrVolumesUnsupported = errors.New("OpenShift builds cannot mount spec.driverContainer.artifacts.hostPaths or claims")

// Start creates the BuildConfig and its Build unless they exist.
func (o OpenShift) Start(ctx context.Context, req Request) error {
	if err := volumesSet(req.Artifacts); err != nil {
		return err
	}
	l := labels(req)
	meta := metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name, Labels: l,
		Annotations: map[string]string{sro.KernelAnnotation: req.Kernel}, OwnerReferences: []metav1.OwnerReference{ownerRef(req.Owner)}}
	spec := commonSpec(req)
	bc := &buildv1.BuildConfig{ObjectMeta: meta, Spec: buildv1.BuildConfigSpec{RunPolicy: buildv1.BuildRunPolicySerial, CommonSpec: spec}}
	if err := o.Client.Create(ctx, bc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating BuildConfig %s/%s: %w", req.Namespace, req.Name, err)
	}
	b := &buildv1.Build{ObjectMeta: *meta.DeepCopy(), Spec: buildv1.BuildSpec{CommonSpec: spec,
		TriggeredBy: []buildv1.BuildTriggerCause{{Message: "special-resource-operator: no image for kernel " + req.Kernel}}}}
	b.Labels[buildv1.BuildConfigLabel] = req.Name
	b.Annotations[buildv1.BuildConfigAnnotation] = req.Name
	b.Annotations[buildv1.BuildNumberAnnotation] = "1"
	if err := o.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Build %s/%s: %w", req.Namespace, req.Name, err)
	}
	return nil
}

// volumesSet is ErrVolumesUnsupported naming the fields that are set, or nil.
func volumesSet(a sro.DriverContainerArtifacts) error {
	var set []string
	if len(a.HostPaths) > 0 {
		set = append(set, "spec.driverContainer.artifacts.hostPaths")
	}
	if len(a.Claims) > 0 {
		set = append(set, "spec.driverContainer.artifacts.claims")
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%s set)", ErrVolumesUnsupported, strings.Join(set, " and "))
}

func commonSpec(req Request) buildv1.CommonSpec {
	var env []corev1.EnvVar
	for _, a := range req.BuildArgs {
		env = append(env, corev1.EnvVar{Name: a.Name, Value: a.Value})
	}
	spec := buildv1.CommonSpec{
		Source: buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: req.Git.URI, Ref: req.Git.Ref}},
		Strategy: buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType,
			DockerStrategy: &buildv1.DockerBuildStrategy{BuildArgs: env}},
		Output: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: req.Image}},
	}
	if req.PushSecret != "" {
		ref := &corev1.LocalObjectReference{Name: req.PushSecret}
		spec.Output.PushSecret = ref
		spec.Strategy.DockerStrategy.PullSecret = ref
	}
	return spec
}

// Status reads the Build's phase.
func (o OpenShift) Status(ctx context.Context, namespace, name string) (Status, bool, error) {
	b := &buildv1.Build{}
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, b); apierrors.IsNotFound(err) {
		return Status{}, false, nil
	} else if err != nil {
		return Status{}, false, fmt.Errorf("reading Build %s/%s: %w", namespace, name, err)
	}
	switch b.Status.Phase {
	case buildv1.BuildPhaseComplete:
		return Status{Phase: Succeeded}, true, nil
	case buildv1.BuildPhaseFailed, buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled:
		msg := b.Status.Message
		if msg == "" {
			msg = string(b.Status.Reason)
		}
		if msg == "" {
			msg = string(b.Status.Phase)
		}
		return Status{Phase: Failed, Message: fmt.Sprintf("Build %s/%s %s: %s", namespace, name, b.Status.Phase, msg)}, true, nil
	}
	return Status{Phase: Running}, true, nil
}

// Delete removes the Build and its BuildConfig.
func (o OpenShift) Delete(ctx context.Context, namespace, name string) error {
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	for _, obj := range []client.Object{&buildv1.Build{ObjectMeta: meta}, &buildv1.BuildConfig{ObjectMeta: meta}} {
		if err := o.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %T %s/%s: %w", obj, namespace, name, err)
		}
	}
	return nil
}
