package specialresource

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/kernel"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/pullorbuild"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

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
	v = recipe.WithKernel(v, k, g.nodeLabels)
	for _, d := range s.sr.Spec.DependsOn {
		if recipe.UsesImage(d) {
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
			return errored(sro.ReasonRecipeFailure, message.Sanitize(fmt.Sprintf("kernel %s: %v", g.kernel, err)), r.Config.Resync), true, nil
		}
		s.in.firstPass[g.kernel] = first
		if !image.Used(s.sr.Spec.DriverContainer) {
			s.in.images[g.kernel] = kernelImage{state: sro.ImageExists}
			continue
		}
		img, err := image.For(first.Spec.DriverContainer, g.kernel)
		if err != nil {
			return errored(sro.ReasonInvalidSpec, message.Sanitize(err.Error()), r.Config.Resync), true, nil
		}
		if img == "" {
			s.in.images[g.kernel] = kernelImage{state: sro.ImageMissing,
				message: "no kernelMappings entry matches this kernel and spec.driverContainer.image is empty"}
			continue
		}
		in := pullorbuild.Input{SR: first, Namespace: s.in.namespace, Kernel: g.kernel, Image: img}
		if prev := kernelStatus(s.sr, g.kernel); prev != nil && prev.Image == img && prev.ImageState == sro.ImageExists {
			s.in.images[g.kernel] = kernelImage{image: img, state: sro.ImageExists, build: pullorbuild.BuildName(in)}
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
		in.PullSecret = secret
		ki, err := r.imageState(s, in)
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

// imageState asks the registry for the image and, when it is missing, follows or starts its
// build. A build no longer needed is deleted by the builds phase (builds.go), not here.
func (r *Reconciler) imageState(s *scope, in pullorbuild.Input) (kernelImage, error) {
	k, img := in.Kernel, in.Image
	res, err := pullorbuild.Check(s.ctx, r.Registry, r.Builder, in)
	if err != nil {
		return kernelImage{}, err
	}
	if res.Start != nil {
		s.fx.startBuilds = append(s.fx.startBuilds, *res.Start)
		s.fx.buildsStarted++
		s.fx.events.Normal(reasonBuildStarted, "Build", fmt.Sprintf("Building %s for kernel %s (%s %s)", img, k, r.Builder.Kind(), res.Start.Name))
	}
	if res.State == sro.ImageBuildFailed {
		if prev := kernelStatus(s.sr, k); prev == nil || prev.ImageState != sro.ImageBuildFailed {
			s.fx.buildsFailed++
		}
	}
	return kernelImage{image: img, state: res.State, message: message.Sanitize(res.Message), build: pullorbuild.BuildName(in)}, nil
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
