package preflightvalidation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
)

// registryOf is a registry holding the listed images (a pure unit test's stand-in).
type registryOf []string

func (r registryOf) Exists(_ context.Context, ref string, _ *corev1.Secret) (bool, error) {
	return slices.Contains(r, ref), nil
}

// noBuilds is a builder with no builds (a pure unit test's stand-in; nothing is started here).
type noBuilds struct{}

func (noBuilds) Start(context.Context, build.Request) error { return nil }
func (noBuilds) Status(context.Context, string, string) (build.Status, bool, error) {
	return build.Status{}, false, nil
}
func (noBuilds) Delete(context.Context, string, string) error { return nil }
func (noBuilds) Kind() string                                 { return "Job" }

const unitKernel = "5.14.0-427.13.1.el9_4.x86_64"

// unitSR is a SpecialResource with a driver image in registry r, built from git when source,
// depending on deps.
func unitSR(name string, source bool, deps ...sro.SpecialResourceDependency) sro.SpecialResource {
	sr := sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sro.SpecialResourceSpec{
		Namespace: name + "-ns", DependsOn: deps,
		DriverContainer: sro.SpecialResourceDriverContainer{Image: "r/" + name + ":{{.KernelFullVersion}}", Modules: []string{name}},
	}}
	if source {
		sr.Spec.DriverContainer.Source.Git = &sro.GitSource{URI: "https://git.example/" + name + ".git"}
	}
	for _, d := range deps {
		sr.Spec.DriverContainer.BuildArgs = append(sr.Spec.DriverContainer.BuildArgs,
			sro.BuildArg{Name: "IMAGE_" + d.Name, Value: "{{.Dependencies." + d.Name + ".Image}}"},
			sro.BuildArg{Name: "NS_" + d.Name, Value: "{{.Dependencies." + d.Name + ".Namespace}}"})
	}
	return sr
}

func imageOf(name string) sro.SpecialResourceDependency {
	return sro.SpecialResourceDependency{Name: name, ImageReference: "true"}
}

// TestVerifyDependencies: a SpecialResource's check sees its dependencies' namespaces and, when
// it uses them, their images for the kernel; it waits (Unknown, naming the dependency) while one
// is missing, being deleted, or has no image for the kernel yet; a cycle is an Error.
func TestVerifyDependencies(t *testing.T) {
	deleting := unitSR("gone", false)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{"x"}
	for _, tc := range []struct {
		name     string
		srs      []sro.SpecialResource
		registry registryOf
		status   sro.VerificationStatus
		// reason is in a's reason; args are in the build a's check asks for.
		reason string
		args   []string
	}{
		{name: "missing dependency without recipe", srs: []sro.SpecialResource{unitSR("a", true, imageOf("base"))},
			status: sro.VerificationUnknown, reason: "waiting for dependencies: base (does not exist; create it, or give dependsOn a recipe)"},
		{name: "missing dependency with recipe", srs: []sro.SpecialResource{unitSR("a", true, sro.SpecialResourceDependency{Name: "base",
			Recipe: &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: "recipes", Name: "base"}}})},
			status: sro.VerificationUnknown, reason: "base (does not exist yet; the SpecialResource controller creates it from dependsOn's recipe)"},
		{name: "dependency being deleted", srs: []sro.SpecialResource{unitSR("a", true, imageOf("gone")), deleting},
			status: sro.VerificationUnknown, reason: "gone (being deleted)"},
		{name: "dependency without image for the kernel", srs: []sro.SpecialResource{unitSR("a", true, imageOf("base")), unitSR("base", false)},
			status: sro.VerificationUnknown, reason: "base (no driver image for kernel " + unitKernel + " yet: False)"},
		{name: "dependency of a dependency missing", srs: []sro.SpecialResource{unitSR("a", true, imageOf("base")), unitSR("base", true, imageOf("root"))},
			status: sro.VerificationUnknown, reason: "base (no driver image for kernel " + unitKernel + " yet: Unknown)"},
		{name: "dependency with image", srs: []sro.SpecialResource{unitSR("a", true, imageOf("base")), unitSR("base", false)},
			registry: registryOf{"r/base:" + unitKernel}, status: sro.VerificationFalse, reason: "building",
			args: []string{"IMAGE_base=r/base:" + unitKernel, "NS_base=base-ns"}},
		{name: "namespace only: no wait for the image", srs: []sro.SpecialResource{unitSR("a", true, sro.SpecialResourceDependency{Name: "base"}), unitSR("base", false)},
			status: sro.VerificationFalse, reason: "building", args: []string{"IMAGE_base=", "NS_base=base-ns"}},
		{name: "chain with images", srs: []sro.SpecialResource{unitSR("a", true, imageOf("base")), unitSR("base", false, imageOf("root")), unitSR("root", false)},
			registry: registryOf{"r/base:" + unitKernel, "r/root:" + unitKernel}, status: sro.VerificationFalse, reason: "building",
			args: []string{"IMAGE_base=r/base:" + unitKernel}},
		{name: "cycle", srs: []sro.SpecialResource{unitSR("a", true, imageOf("b")), unitSR("b", true, imageOf("a"))},
			status: sro.VerificationError, reason: "dependency cycle: a → b → a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Registry: tc.registry, Builder: noBuilds{}}
			pv := &sro.PreflightValidation{Spec: sro.PreflightValidationSpec{KernelVersion: unitKernel}}
			v := newVerifier(context.Background(), r, pv, tc.srs, nil, "4.15.0")
			c, err := v.check(&tc.srs[0])
			if err != nil {
				t.Fatal(err)
			}
			if c.status != tc.status || !strings.Contains(c.reason, tc.reason) {
				t.Fatalf("a: %s %q, want %s with %q", c.status, c.reason, tc.status, tc.reason)
			}
			if tc.args == nil {
				if c.start != nil {
					t.Fatalf("a build was asked for: %+v", c.start)
				}
				return
			}
			if c.start == nil {
				t.Fatal("no build asked for")
			}
			var got []string
			for _, a := range c.start.BuildArgs {
				got = append(got, a.Name+"="+a.Value)
			}
			for _, want := range tc.args {
				if !slices.Contains(got, want) {
					t.Errorf("build args %v lack %s", got, want)
				}
			}
		})
	}
}

// TestSpecErrorsWaitForAChange: an Error that follows from the specs alone (invalid spec, cycle,
// template, kernel mapping) is final, so the PreflightValidation is not looked at again every
// RetryDelay for it (a SpecialResource's change wakes the controller); a check that waits is not.
func TestSpecErrorsWaitForAChange(t *testing.T) {
	brokenTemplate := unitSR("a", true)
	brokenTemplate.Spec.DriverContainer.Image = "r/a:{{.NoSuchValue}}"
	badMapping := unitSR("a", true)
	badMapping.Spec.DriverContainer.KernelMappings = []sro.KernelMapping{{Regexp: "5.14.(", Image: "r/a:x"}}
	badNamespace := unitSR("a", true)
	badNamespace.Spec.Namespace = "Not_A_Namespace"
	for _, tc := range []struct {
		name string
		// kernel is the upgrade's kernel (unitKernel when empty).
		kernel string
		srs    []sro.SpecialResource
		status sro.VerificationStatus
		final  bool
		// field is named in the reason of an Error.
		field string
	}{
		{name: "template error", srs: []sro.SpecialResource{brokenTemplate}, status: sro.VerificationError, final: true, field: "spec.driverContainer.image"},
		{name: "kernel mapping error", srs: []sro.SpecialResource{badMapping}, status: sro.VerificationError, final: true, field: "spec.driverContainer.kernelMappings[0].regexp"},
		{name: "image not a reference for the kernel", kernel: "6.1.21-v8+", srs: []sro.SpecialResource{unitSR("a", true)}, status: sro.VerificationError, final: true, field: "spec.driverContainer.image"},
		{name: "invalid spec", srs: []sro.SpecialResource{badNamespace}, status: sro.VerificationError, final: true, field: "spec.namespace"},
		{name: "cycle", srs: []sro.SpecialResource{unitSR("a", true, imageOf("b")), unitSR("b", true, imageOf("a"))}, status: sro.VerificationError, final: true, field: "spec.dependsOn[0].name"},
		{name: "waiting for a dependency", srs: []sro.SpecialResource{unitSR("a", true, imageOf("base")), unitSR("base", false)}, status: sro.VerificationUnknown},
		{name: "image to build", srs: []sro.SpecialResource{unitSR("a", true)}, status: sro.VerificationFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Registry: registryOf{}, Builder: noBuilds{}}
			k := tc.kernel
			if k == "" {
				k = unitKernel
			}
			pv := &sro.PreflightValidation{Spec: sro.PreflightValidationSpec{KernelVersion: k}}
			c, err := newVerifier(context.Background(), r, pv, tc.srs, nil, "4.15.0").check(&tc.srs[0])
			if err != nil {
				t.Fatal(err)
			}
			if c.status != tc.status || c.final != tc.final || !strings.Contains(c.reason, tc.field) {
				t.Fatalf("a: %s (final %v) %q, want %s (final %v) naming %q", c.status, c.final, c.reason, tc.status, tc.final, tc.field)
			}
			if retry([]*check{c}) == tc.final {
				t.Fatalf("retry by time: %v for a %s check with final %v", !tc.final, c.status, c.final)
			}
		})
	}
}

// refusing is a registry that refuses every request's credentials.
type refusing struct{}

func (refusing) Exists(context.Context, string, *corev1.Secret) (bool, error) {
	return false, fmt.Errorf("HEAD r/a: %w", &transport.Error{StatusCode: http.StatusUnauthorized})
}

// TestRefusedCredentials: a registry refusing the credentials is an Error naming the pull Secret
// field (the SpecialResource controller's words), not Unknown for ever; not final, so it is looked
// at again after RetryDelay (pull Secrets are not watched); and nothing is built.
func TestRefusedCredentials(t *testing.T) {
	srs := []sro.SpecialResource{unitSR("a", true)}
	r := &Reconciler{Registry: refusing{}, Builder: noBuilds{}}
	pv := &sro.PreflightValidation{Spec: sro.PreflightValidationSpec{KernelVersion: unitKernel}}
	c, err := newVerifier(context.Background(), r, pv, srs, nil, "4.15.0").check(&srs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "spec.driverContainer.pullSecret: not set, and the registry refused anonymous access to image r/a:" + unitKernel + ": HTTP 401 Unauthorized"
	if c.status != sro.VerificationError || c.final || !strings.HasPrefix(c.reason, want) {
		t.Fatalf("a: %s (final %v) %q, want Error (not final) %q…", c.status, c.final, c.reason, want)
	}
	if c.start != nil {
		t.Fatalf("a build was asked for: %+v", c.start)
	}
	if !retry([]*check{c}) {
		t.Fatal("not looked at again by time")
	}
}

// secretsOf is an API reader holding the listed Secrets (a pure unit test's stand-in).
type secretsOf []corev1.Secret

func (s secretsOf) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	for i := range s {
		if s[i].Namespace == key.Namespace && s[i].Name == key.Name {
			s[i].DeepCopyInto(obj.(*corev1.Secret))
			return nil
		}
	}
	return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
}

func (secretsOf) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not listed here")
}

// keychainRegistry asks for nothing, but reads the pull Secret's credentials first, as the real
// registry client does (image.Remote): a Secret that is not a docker config fails there.
type keychainRegistry struct{}

func (keychainRegistry) Exists(_ context.Context, _ string, secret *corev1.Secret) (bool, error) {
	if _, err := image.Keychain(secret); err != nil {
		return false, err
	}
	return false, nil
}

// TestPullSecretProblems: a pull Secret that is missing or not a docker config is an Error naming
// spec.driverContainer.pullSecret, in the SpecialResource controller's words (the same function
// reads it for both), never Unknown "the registry could not be asked" (pending for ever); not
// final, so it is looked at again after RetryDelay (Secrets are not watched); nothing is built.
// Never the Secret's content.
func TestPullSecretProblems(t *testing.T) {
	secret := func(name string, data map[string][]byte) corev1.Secret {
		return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a-ns", Name: name}, Data: data}
	}
	for _, tc := range []struct {
		name    string
		secrets secretsOf
		status  sro.VerificationStatus
		reason  string
	}{
		{name: "missing", status: sro.VerificationError, reason: "spec.driverContainer.pullSecret: Secret a-ns/pull not found"},
		{name: "neither key", secrets: secretsOf{secret("pull", map[string][]byte{"token": []byte("s3cret")})},
			status: sro.VerificationError, reason: "spec.driverContainer.pullSecret: pull Secret a-ns/pull has neither .dockerconfigjson nor .dockercfg"},
		{name: "not JSON", secrets: secretsOf{secret("pull", map[string][]byte{corev1.DockerConfigJsonKey: []byte("{s3cret")})},
			status: sro.VerificationError, reason: "spec.driverContainer.pullSecret: pull Secret a-ns/pull: not a valid docker config"},
		{name: "a docker config", secrets: secretsOf{secret("pull", map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)})},
			status: sro.VerificationFalse, reason: "building"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := unitSR("a", true)
			sr.Spec.DriverContainer.PullSecret = "pull"
			srs := []sro.SpecialResource{sr}
			r := &Reconciler{Registry: keychainRegistry{}, Builder: noBuilds{}, APIReader: tc.secrets}
			pv := &sro.PreflightValidation{Spec: sro.PreflightValidationSpec{KernelVersion: unitKernel}}
			c, err := newVerifier(context.Background(), r, pv, srs, nil, "4.15.0").check(&srs[0])
			if err != nil {
				t.Fatal(err)
			}
			if c.status != tc.status || c.final || !strings.HasPrefix(c.reason, tc.reason) {
				t.Fatalf("a: %s (final %v) %q, want %s (not final) %q…", c.status, c.final, c.reason, tc.status, tc.reason)
			}
			if strings.Contains(c.reason, "s3cret") {
				t.Fatalf("the Secret's content reached the reason: %q", c.reason)
			}
			if tc.status == sro.VerificationError && c.start != nil {
				t.Fatalf("a build was asked for: %+v", c.start)
			}
			if !retry([]*check{c}) {
				t.Fatal("not looked at again by time")
			}
		})
	}
}

// TestVerifyRendersTheNodesOS: on a cluster whose kernels do not name their operating system
// (Ubuntu), the check renders the kernel's OS variables from the node-feature-discovery labels of
// the nodes the SpecialResource selects, so it looks for the image the SpecialResource
// controller will use; a node it does not select has no say.
func TestVerifyRendersTheNodesOS(t *testing.T) {
	const next = "6.8.0-50-generic"
	os := func(id, major, minor string) map[string]string {
		return map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":               id,
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": major,
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": minor,
			"role": "gpu",
		}
	}
	node := func(name string, labels map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		n.Status.NodeInfo.KernelVersion = "6.8.0-45-generic"
		return n
	}
	other := os("debian", "12", "")
	delete(other, "role")
	nodes := []corev1.Node{node("w1", os("ubuntu", "22", "04")), node("w0", other)}
	sr := unitSR("a", false)
	sr.Spec.NodeSelector = map[string]string{"role": "gpu"}
	sr.Spec.DriverContainer.Image = "r/a:{{.OperatingSystemMajorMinor}}-{{.KernelFullVersion}}"
	r := &Reconciler{Registry: registryOf{"r/a:ubuntu22.04-" + next}, Builder: noBuilds{}}
	pv := &sro.PreflightValidation{Spec: sro.PreflightValidationSpec{KernelVersion: next}}
	c, err := newVerifier(context.Background(), r, pv, []sro.SpecialResource{sr}, nodes, "4.15.0").check(&sr)
	if err != nil {
		t.Fatal(err)
	}
	if c.status != sro.VerificationTrue || !strings.Contains(c.reason, "r/a:ubuntu22.04-"+next) {
		t.Fatalf("%s %q, want True for the image of the nodes' OS", c.status, c.reason)
	}
}
