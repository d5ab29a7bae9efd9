package specialresource

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// secretData is a value a test puts into pull Secrets: it must never reach status or events.
const secretData = "s3cr3t-Zq81"

// TestMalformedPullSecret: a pull Secret whose .dockerconfigjson is not a docker config is the
// user's input to fix: Errored/InvalidSpec naming spec.driverContainer.pullSecret (not waiting
// for the registry), a Warning, nothing of the Secret's content; fixed, the image is found.
func TestMalformedPullSecret(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{" + secretData)}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	sr := h.specialResource("kmod")
	sr.Spec.Namespace = ns
	sr.Spec.DriverContainer.PullSecret = "pull"
	h.create(sr)

	want := fmt.Sprintf("spec.driverContainer.pullSecret: pull Secret %s/pull: not a valid docker config", ns)
	got := h.waitSR(sr.Name, "Errored InvalidSpec", isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec))
	if msg := conditionMessage(got, sro.ConditionErrored); msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	e := h.waitWarning(sr.Name, sro.ReasonInvalidSpec, want)
	h.noSecretData(e)

	h.updateSecret(ns, "pull", dockerConfig(h.registry, "user", "password"))
	h.waitDaemonSets(sr.Name, kernelX)
}

// TestRegistryRefusesPullSecret: a registry that answers 401 to the pull Secret's credentials
// makes the SpecialResource Errored/InvalidSpec naming spec.driverContainer.pullSecret, the
// Secret and the HTTP status (never the password), with a Warning; with the right password in the
// Secret, the image is found after RetryDelay.
func TestRegistryRefusesPullSecret(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	const user, password = "vendor", "right-password"
	reg, ref := privateImage(t, user, password)
	ns := h.recipeNamespace()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: dockerConfig(reg, user, secretData)}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	sr := h.specialResource("kmod")
	sr.Spec.Namespace = ns
	sr.Spec.DriverContainer.Image = reg + "/vendor/kmod:{{.KernelFullVersion}}"
	sr.Spec.DriverContainer.PullSecret = "pull"
	h.create(sr)

	want := fmt.Sprintf("spec.driverContainer.pullSecret: the registry refused the credentials of Secret %s/pull for image %s: HTTP 401 Unauthorized", ns, ref)
	got := h.waitSR(sr.Name, "Errored InvalidSpec", isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.HasPrefix(msg, want) || strings.Contains(msg, secretData) {
		t.Fatalf("message %q, want %q… without the password", msg, want)
	}
	e := h.waitWarning(sr.Name, sro.ReasonInvalidSpec, want)
	h.noSecretData(e)

	h.updateSecret(ns, "pull", dockerConfig(reg, user, password))
	h.waitDaemonSets(sr.Name, kernelX)
}

// TestRegistryRefusesAnonymous: a registry that answers 401 to a SpecialResource with no pull
// Secret makes it Errored/InvalidSpec naming spec.driverContainer.pullSecret (not Progressing for
// ever, waiting for an image it is not allowed to see), with a Warning; once the spec names a
// Secret with the right credentials, the image is found.
func TestRegistryRefusesAnonymous(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	const user, password = "vendor", "right-password"
	reg, ref := privateImage(t, user, password)
	ns := h.recipeNamespace()
	sr := h.specialResource("kmod")
	sr.Spec.Namespace = ns
	sr.Spec.DriverContainer.Image = reg + "/vendor/kmod:{{.KernelFullVersion}}"
	h.create(sr)

	want := "spec.driverContainer.pullSecret: not set, and the registry refused anonymous access to image " + ref + ": HTTP 401 Unauthorized"
	got := h.waitSR(sr.Name, "Errored InvalidSpec", isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.HasPrefix(msg, want) {
		t.Fatalf("message %q, want %q…", msg, want)
	}
	h.waitWarning(sr.Name, sro.ReasonInvalidSpec, want)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: dockerConfig(reg, user, password)}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.PullSecret = "pull" })
	h.waitDaemonSets(sr.Name, kernelX)
}

// privateImage starts a registry that wants user and password (basicAuthRegistry) and pushes an
// image for kernelX to it; it returns the registry's host:port and the image's reference.
func privateImage(t *testing.T, user, password string) (reg, ref string) {
	t.Helper()
	reg = basicAuthRegistry(t, user, password)
	ref = reg + "/vendor/kmod:" + kernelX
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(&authn.Basic{Username: user, Password: password})); err != nil {
		t.Fatal(err)
	}
	return reg, ref
}

// basicAuthRegistry is an OCI registry that wants HTTP basic auth for every request; it returns
// its host:port.
func basicAuthRegistry(t *testing.T, user, password string) string {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// dockerConfig is the data of a kubernetes.io/dockerconfigjson Secret for one registry.
func dockerConfig(reg, user, password string) map[string][]byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, reg, auth)}
}

func (h *harness) updateSecret(ns, name string, data map[string][]byte) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		s.Data = data
		return env.Client.Update(context.Background(), s)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// noSecretData fails the test when an event carries the test's secret value.
func (h *harness) noSecretData(e *corev1.Event) {
	h.t.Helper()
	if strings.Contains(e.Message, secretData) {
		h.t.Fatalf("event %s carries the Secret's data: %q", e.Reason, e.Message)
	}
}

// TestPullSecretGoneNodeFollowsKernel: served on kernel X with a pull Secret, the Secret is
// deleted and the only node reboots into Y, whose image must be looked up. The SpecialResource is
// Errored/InvalidSpec naming the Secret, Y's image Unknown with that message, and still the
// cluster follows the kernels: the node loses the driver's state label and X's DaemonSet, which
// no node runs, goes. With the Secret back, Y is served.
func TestPullSecretGoneNodeFollowsKernel(t *testing.T) {
	h := start(t)
	h.node("a", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	h.push("vendor/kmod:" + kernelY)
	ns := h.recipeNamespace()
	newSecret := func() *corev1.Secret { return h.pullSecret(ns) }
	sr := h.servedWithPullSecret(ns)
	l1 := naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "node a labelled", func() (bool, string) { return h.nodeNamed("a").Labels[l1] == "Ready", "" })

	if err := env.Client.Delete(context.Background(), newSecret()); err != nil {
		t.Fatal(err)
	}
	h.setKernel("a", kernelY)
	want := fmt.Sprintf("spec.driverContainer.pullSecret: Secret %s/pull not found", ns)
	got := h.waitSR(sr.Name, "Errored InvalidSpec", isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec))
	if msg := conditionMessage(got, sro.ConditionErrored); msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	h.waitSR(sr.Name, "kernel Y's image Unknown with the reason", func(sr *sro.SpecialResource) bool {
		ks := kernelStatus(sr, kernelY)
		return ks != nil && ks.ImageState == sro.ImageUnknown && ks.Message == want
	})
	h.waitDaemonSets(sr.Name)
	poll.Until(t, "node a without the driver's state label", func() (bool, string) {
		l := h.nodeNamed("a").Labels
		return l[l1] == "", fmt.Sprint(l)
	})

	if err := env.Client.Create(context.Background(), newSecret()); err != nil {
		t.Fatal(err)
	}
	h.waitDaemonSets(sr.Name, kernelY)
}

// pullSecret is a pull Secret "pull" in namespace ns that the test registry accepts.
func (h *harness) pullSecret(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: dockerConfig(h.registry, "user", "pw")}
}

// servedWithPullSecret creates the pull Secret in ns and kmod, in ns with that Secret, runs its
// driver on kernel X and waits until it is Ready.
func (h *harness) servedWithPullSecret(ns string) *sro.SpecialResource {
	h.t.Helper()
	if err := env.Client.Create(context.Background(), h.pullSecret(ns)); err != nil {
		h.t.Fatal(err)
	}
	sr := h.specialResource("kmod")
	sr.Spec.Namespace = ns
	sr.Spec.DriverContainer.PullSecret = "pull"
	h.create(sr)
	h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	return sr
}
