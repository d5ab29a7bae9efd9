package build

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// DefaultJobImage is the kaniko executor that Job builds run.
const DefaultJobImage = "gcr.io/kaniko-project/executor:v1.23.2"

// Job builds with a Kubernetes Job running kaniko: the git source as build context, the build
// arguments, the pull Secret as kaniko's docker config (to pull bases and push the result), and
// the artifacts' host paths and claims mounted.
type Job struct {
	Client client.Client
	// Image is the kaniko executor image (DefaultJobImage when empty).
	Image string
}

// Kind is "Job".
func (Job) Kind() string { return "Job" }

// ErrDockerConfigJSONNeeded is returned for a pull Secret without a .dockerconfigjson key (a
// kubernetes.io/dockercfg Secret): the Job mounts that key as kaniko's config.json, and a Secret
// volume of a missing key never mounts, so the pod, and the Job, would wait for ever (the legacy
// .dockercfg also lacks the {"auths": …} wrapper kaniko reads).
var ErrDockerConfigJSONNeeded = errors.New("a Job (kaniko) build needs a kubernetes.io/dockerconfigjson Secret")

// Start creates the build Job unless it exists.
func (j Job) Start(ctx context.Context, req Request) error {
	if err := pushSecretUsable(req); err != nil {
		return err
	}
	job := j.job(req)
	if err := j.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating build Job %s/%s: %w", req.Namespace, req.Name, err)
	}
	return nil
}

// pushSecretUsable is ErrDockerConfigJSONNeeded naming the Secret and the key it has, or nil.
func pushSecretUsable(req Request) error {
	if req.PushSecret == "" || req.PushSecretKey == "" || req.PushSecretKey == corev1.DockerConfigJsonKey {
		return nil
	}
	return fmt.Errorf("spec.driverContainer.pullSecret: Secret %s/%s has no %s key (only %s): %w",
		req.Namespace, req.PushSecret, corev1.DockerConfigJsonKey, req.PushSecretKey, ErrDockerConfigJSONNeeded)
}

func (j Job) job(req Request) *batchv1.Job {
	img := j.Image
	if img == "" {
		img = DefaultJobImage
	}
	args := []string{"--context=" + gitContext(req.Git), "--destination=" + req.Image, "--dockerfile=Dockerfile"}
	for _, a := range req.BuildArgs {
		args = append(args, "--build-arg="+a.Name+"="+a.Value)
	}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "kaniko", Image: img, Args: args}},
	}
	c := &pod.Containers[0]
	if strings.HasPrefix(req.Git.URI, "http://") {
		// kaniko clones the git:// context over https unless told otherwise: a plain-http
		// server (a lab's git mirror) would refuse it.
		c.Env = append(c.Env, corev1.EnvVar{Name: "GIT_PULL_METHOD", Value: "http"})
	}
	if req.PushSecret != "" {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "docker-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: req.PushSecret,
			Items:      []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
		}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "docker-config", MountPath: "/kaniko/.docker", ReadOnly: true})
	}
	for i, hp := range req.Artifacts.HostPaths {
		name := fmt.Sprintf("host-path-%d", i)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hp.SourcePath}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path.Clean(hp.DestinationDir), ReadOnly: true})
	}
	for i, cl := range req.Artifacts.Claims {
		name := fmt.Sprintf("claim-%d", i)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cl.Name, ReadOnly: true}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path.Clean(cl.MountPath), ReadOnly: true})
	}
	l := labels(req)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Namespace, Name: req.Name, Labels: l,
			Annotations:     map[string]string{sro.KernelAnnotation: req.Kernel},
			OwnerReferences: []metav1.OwnerReference{ownerRef(req.Owner)},
		},
		Spec: batchv1.JobSpec{
			// One retry for a node that went away; a build that fails twice fails for a reason
			// someone has to read in its logs.
			BackoffLimit: ptr.To[int32](1),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: pod},
		},
	}
}

// Status reads the Job's conditions.
func (j Job) Status(ctx context.Context, namespace, name string) (Status, bool, error) {
	job := &batchv1.Job{}
	if err := j.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job); apierrors.IsNotFound(err) {
		return Status{}, false, nil
	} else if err != nil {
		return Status{}, false, fmt.Errorf("reading build Job %s/%s: %w", namespace, name, err)
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Status{Phase: Succeeded}, true, nil
		case batchv1.JobFailed:
			msg := c.Message
			if msg == "" {
				msg = c.Reason
			}
			return Status{Phase: Failed, Message: fmt.Sprintf("Job %s/%s failed: %s", namespace, name, msg)}, true, nil
		}
	}
	return Status{Phase: Running}, true, nil
}

// Delete removes the Job and its pods.
func (j Job) Delete(ctx context.Context, namespace, name string) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := j.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting build Job %s/%s: %w", namespace, name, err)
	}
	return nil
}

func ownerRef(sr *sro.SpecialResource) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: sro.GroupVersion.String(), Kind: "SpecialResource", Name: sr.Name, UID: sr.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}
