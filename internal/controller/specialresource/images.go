package specialresource

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

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
	cv := s.in.clusterVersion
	if g != nil {
		cv = kernelClusterVersion(s, g.kernel)
	}
	v := recipe.Values{
		ClusterVersion: cv, ClusterVersionMajorMinor: kernel.MajorMinor(cv),
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
// build. Kernels are independent: one kernel's failed build does not stop the others, nor does a
// lookup the user's input prevents (a pull Secret missing, malformed, or refused by the
// registry; an image that renders, for that kernel, to an invalid reference): that kernel's image
// is Unknown with the reason (blocked), and the reconcile goes on, so that nodes and objects still
// follow the kernels (a node rebooted into that kernel loses its labels, the DaemonSet of a kernel
// no node runs goes) and the other kernels are served, their later shared states included (plan's
// failed kernels); the outcome is Errored naming the field (s.in.imageProblem).
func (r *Reconciler) images(s *scope) (outcome, bool, error) {
	s.in.images = map[string]kernelImage{}
	s.in.firstPass = map[string]*sro.SpecialResource{}
	var (
		secret        *corev1.Secret
		secretProblem string
		secretRead    bool
	)
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
			if secret, secretProblem, err = r.pullSecret(s); err != nil {
				return outcome{}, false, err
			}
		}
		// The build keeps its name: a build running for the kernel is not taken for a
		// superseded one and deleted (builds.go).
		unknown := kernelImage{image: img, state: sro.ImageUnknown, build: pullorbuild.BuildName(in), blocked: true}
		if secretProblem != "" {
			unknown.message = secretProblem
			s.in.images[g.kernel] = unknown
			s.in.imageProblem = cmp.Or(s.in.imageProblem, secretProblem)
			continue
		}
		in.PullSecret = secret
		ki, problem, err := r.imageState(s, in)
		if err != nil {
			return outcome{}, false, err
		}
		if problem != "" {
			unknown.message = problem
			s.in.images[g.kernel] = unknown
			s.in.imageProblem = cmp.Or(s.in.imageProblem, problem)
			continue
		}
		s.in.images[g.kernel] = ki
	}
	return outcome{}, false, nil
}

// pullSecret reads the pull Secret (pullorbuild.PullSecret, which the preflight check uses too).
// problem says, naming the field, why it cannot be used: it does not exist, or is not a docker
// config (the user's input, to be fixed by the user: not a registry to wait for; the message names
// the Secret, never its content).
func (r *Reconciler) pullSecret(s *scope) (secret *corev1.Secret, problem string, err error) {
	return pullorbuild.PullSecret(s.ctx, r.APIReader, s.in.namespace, s.sr.Spec.DriverContainer.PullSecret)
}

// imageState asks the registry for the image and, when it is missing, follows or starts its
// build. A build no longer needed is deleted by the builds phase (builds.go), not here. problem
// says, naming the field, what in the user's input keeps the image from being looked up: the
// registry refused the pull Secret's credentials, or anonymous access when there is none (HTTP 401
// or 403), or the image rendered for the kernel is not a valid reference. Waiting does not change
// that, the spec or the Secret must; nothing else is decided then.
func (r *Reconciler) imageState(s *scope, in pullorbuild.Input) (ki kernelImage, problem string, err error) {
	k, img := in.Kernel, in.Image
	res, err := pullorbuild.Check(s.ctx, r.Registry, r.Builder, in)
	if err != nil {
		return kernelImage{}, "", err
	}
	if res.Refused != nil || res.Invalid != nil {
		return kernelImage{}, message.Sanitize(res.Message), nil
	}
	if res.Start != nil {
		// Announced and counted by write, once the builder started it: it may refuse it.
		s.fx.startBuilds = append(s.fx.startBuilds, *res.Start)
	}
	if newBuildFailure(res, kernelStatus(s.sr, k)) {
		s.fx.buildsFailed++
	}
	return kernelImage{image: img, state: res.State, message: message.Sanitize(res.Message), build: pullorbuild.BuildName(in),
		unconfirmed: res.Unconfirmed}, "", nil
}

// newBuildFailure says whether res is a build failure to count (sro_builds_total{result="failed"}):
// once, when the kernel's status (prev) did not say so already. A build that succeeded and whose
// image the registry does not show yet (Unconfirmed) is not one: it is looked at again, and the
// image may well appear (a mirror catching up).
func newBuildFailure(res pullorbuild.Result, prev *sro.KernelStatus) bool {
	return res.State == sro.ImageBuildFailed && !res.Unconfirmed && (prev == nil || prev.ImageState != sro.ImageBuildFailed)
}

// kernelClusterVersion is the cluster version kernel k's templates are rendered with: the one its
// status entry keeps (the cluster's when the kernel was first seen), else the cluster's now. During
// an upgrade the cluster's version changes long before the nodes reboot: a kernel still running
// keeps its image (no rebuild, no driver roll under MCO's drains), and a kernel first seen during
// the upgrade gets the new version.
func kernelClusterVersion(s *scope, k string) string {
	if prev := kernelStatus(s.sr, k); prev != nil && prev.ClusterVersion != "" {
		return prev.ClusterVersion
	}
	return s.in.clusterVersion
}

// kernelStatus is the status entry of kernel k, or nil.
func kernelStatus(sr *sro.SpecialResource, k string) *sro.KernelStatus { return sr.Status.Kernel(k) }
