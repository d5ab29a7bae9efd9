package specialresource

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/kernel"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// registryTimeout bounds one registry lookup.
const registryTimeout = 15 * time.Second

// values are the template variables for kernel k (empty k: the values of manifests that are not
// kernel-affine).
func (r *Reconciler) values(s *scope, g *kernelGroup) recipe.Values {
	v := recipe.Values{
		ClusterVersion: s.in.clusterVersion, ClusterVersionMajorMinor: kernel.MajorMinor(s.in.clusterVersion),
		Namespace: s.in.namespace, PushSecretName: s.sr.Spec.DriverContainer.PullSecret, SpecialResource: s.sr,
		Dependencies: map[string]recipe.Dependency{},
	}
	for name, d := range s.in.deps {
		v.Dependencies[name] = d
	}
	if g == nil {
		return v
	}
	k := g.kernel
	os := kernel.OSOf(k, g.nodeLabels)
	v.KernelFullVersion, v.KernelVersion, v.KernelPatchVersion = k, k, kernel.PatchVersion(k)
	v.OperatingSystemMajor, v.OperatingSystemMajorMinor, v.OperatingSystemDecimal = os.Major, os.MajorMinor, os.Decimal
	for _, d := range s.sr.Spec.DependsOn {
		if d.ImageReference == "true" {
			dep := v.Dependencies[d.Name]
			dep.Image = s.in.depImages[d.Name][k]
			v.Dependencies[d.Name] = dep
		}
	}
	return v
}

// driverHash changes when what the driver pods run with changes (version, build and run
// arguments, modules), so that the built-in recipe rolls them.
func driverHash(sr *sro.SpecialResource) string {
	dc := sr.Spec.DriverContainer
	parts := []string{sr.Spec.Version, strings.Join(dc.Modules, ",")}
	for _, a := range dc.BuildArgs {
		parts = append(parts, "b:"+a.Name+"="+a.Value)
	}
	for _, a := range dc.RunArgs {
		parts = append(parts, "r:"+a.Name+"="+a.Value)
	}
	return naming.Hash(strings.Join(parts, "\x00"))
}

// usesImages: the SpecialResource names a driver image (a ConfigMap recipe may not need one).
func usesImages(sr *sro.SpecialResource) bool {
	return sr.Spec.DriverContainer.Image != "" || len(sr.Spec.DriverContainer.KernelMappings) > 0
}

// images finds, for every kernel, the driver image in the registry, or starts (or follows) its
// build. Kernels are independent: one kernel's failed build does not stop the others.
func (r *Reconciler) images(s *scope) (outcome, bool, error) {
	s.in.images = map[string]kernelImage{}
	s.in.firstPass = map[string]*sro.SpecialResource{}
	var secret *corev1.Secret
	secretRead := false
	for i := range s.in.kernels {
		g := &s.in.kernels[i]
		vals := r.values(s, g)
		first, err := recipe.FirstPass(s.sr, vals)
		if err != nil {
			return errored(sro.ReasonRecipeFailure, sanitize(fmt.Sprintf("kernel %s: %v", g.kernel, err)), r.Config.Resync), true, nil
		}
		s.in.firstPass[g.kernel] = first
		if !usesImages(s.sr) {
			s.in.images[g.kernel] = kernelImage{state: sro.ImageExists}
			continue
		}
		img, err := image.For(first.Spec.DriverContainer, g.kernel)
		if err != nil {
			return errored(sro.ReasonInvalidSpec, sanitize(err.Error()), r.Config.Resync), true, nil
		}
		if img == "" {
			s.in.images[g.kernel] = kernelImage{state: sro.ImageMissing,
				message: "no kernelMappings entry matches this kernel and spec.driverContainer.image is empty"}
			continue
		}
		if prev := kernelStatus(s.sr, g.kernel); prev != nil && prev.Image == img && prev.ImageState == sro.ImageExists {
			s.in.images[g.kernel] = kernelImage{image: img, state: sro.ImageExists}
			continue
		}
		if !secretRead {
			secretRead = true
			var stop bool
			if secret, stop, err = r.pullSecret(s); err != nil || stop {
				out := errored(sro.ReasonInvalidSpec, fmt.Sprintf("spec.driverContainer.pullSecret: Secret %s/%s not found", s.in.namespace, s.sr.Spec.DriverContainer.PullSecret), r.Config.RetryDelay)
				return out, stop, err
			}
		}
		ki, err := r.imageState(s, first, g.kernel, img, secret)
		if err != nil {
			return outcome{}, false, err
		}
		s.in.images[g.kernel] = ki
	}
	return outcome{}, false, nil
}

// pullSecret reads the pull Secret (directly: the operator caches only its own Secrets).
func (r *Reconciler) pullSecret(s *scope) (*corev1.Secret, bool, error) {
	name := s.sr.Spec.DriverContainer.PullSecret
	if name == "" {
		return nil, false, nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(s.ctx, client.ObjectKey{Namespace: s.in.namespace, Name: name}, secret); apierrors.IsNotFound(err) {
		return nil, true, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("reading pull Secret %s/%s: %w", s.in.namespace, name, err)
	}
	return secret, false, nil
}

// imageState asks the registry for img and, when it is missing, follows or starts its build.
func (r *Reconciler) imageState(s *scope, first *sro.SpecialResource, k, img string, secret *corev1.Secret) (kernelImage, error) {
	ctx, cancel := context.WithTimeout(s.ctx, registryTimeout)
	defer cancel()
	exists, err := r.Registry.Exists(ctx, img, secret)
	args := build.Args(first, k)
	buildName := build.Name(first, k, img, args)
	if err != nil {
		return kernelImage{image: img, state: sro.ImageUnknown, message: "the registry could not be asked: " + registryError(err)}, nil
	}
	if exists {
		// A build that produced it is no longer needed (a failed one is kept for its logs).
		if st, found, err := r.Builder.Status(s.ctx, s.in.namespace, buildName); err != nil {
			return kernelImage{}, err
		} else if found && st.Phase == build.Succeeded {
			s.fx.deleteBuilds = append(s.fx.deleteBuilds, buildName)
		}
		return kernelImage{image: img, state: sro.ImageExists}, nil
	}
	git := first.Spec.DriverContainer.Source.Git
	if git == nil {
		return kernelImage{image: img, state: sro.ImageMissing,
			message: "image " + img + " is not in the registry and spec.driverContainer.source gives nothing to build it from"}, nil
	}
	st, found, err := r.Builder.Status(s.ctx, s.in.namespace, buildName)
	if err != nil {
		return kernelImage{}, err
	}
	switch {
	case !found:
		s.fx.startBuilds = append(s.fx.startBuilds, build.Request{Owner: s.sr, Namespace: s.in.namespace, Name: buildName, Kernel: k,
			Image: img, Git: *git, BuildArgs: args, PushSecret: first.Spec.DriverContainer.PullSecret, Artifacts: first.Spec.DriverContainer.Artifacts})
		s.fx.buildsStarted++
		s.fx.events.Normal(reasonBuildStarted, "Build", fmt.Sprintf("Building %s for kernel %s (%s %s)", img, k, r.Builder.Kind(), buildName))
		return kernelImage{image: img, state: sro.ImageBuilding, message: "building (" + r.Builder.Kind() + " " + buildName + ")"}, nil
	case st.Phase == build.Running:
		return kernelImage{image: img, state: sro.ImageBuilding, message: "building (" + r.Builder.Kind() + " " + buildName + ")"}, nil
	case st.Phase == build.Failed:
		if prev := kernelStatus(s.sr, k); prev == nil || prev.ImageState != sro.ImageBuildFailed {
			s.fx.buildsFailed++
		}
		return kernelImage{image: img, state: sro.ImageBuildFailed, message: sanitize(st.Message) +
			" (change an input, or delete the " + r.Builder.Kind() + ", to build again)"}, nil
	}
	// The build says it pushed, the registry says it has nothing.
	return kernelImage{image: img, state: sro.ImageBuildFailed,
		message: r.Builder.Kind() + " " + buildName + " succeeded but the registry has no " + img}, nil
}

// kernelStatus is the status entry of kernel k, or nil.
func kernelStatus(sr *sro.SpecialResource, k string) *sro.KernelStatus {
	for i := range sr.Status.Kernels {
		if sr.Status.Kernels[i].KernelVersion == k {
			return &sr.Status.Kernels[i]
		}
	}
	return nil
}
