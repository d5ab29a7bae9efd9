// Package pullorbuild decides, for one SpecialResource and one kernel, whether the driver image
// can be pulled or must be built, and follows the build: the seed's "SRO will first try to pull
// a DriverContainer. If the DriverContainer does not exist, SRO will kick off a build". It reads
// (the registry, the build's state) and says what to write; the caller writes it, so that both
// the SpecialResource controller and the preflight check keep their writes in one place.
package pullorbuild

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/message"
)

// registryTimeout bounds one registry lookup.
const registryTimeout = 15 * time.Second

// Input is one image to find.
type Input struct {
	// SR is the SpecialResource rendered for the kernel (first template pass).
	SR *sro.SpecialResource
	// Namespace is where builds run (the SpecialResource's namespace).
	Namespace string
	Kernel    string
	Image     string
	// PullSecret is the SpecialResource's pull Secret (nil: none).
	PullSecret *corev1.Secret
}

// Result is what was found, and what the caller should write.
type Result struct {
	State   sro.ImageState
	Message string
	// Start is a build to start (nil: none).
	Start *build.Request
	// Delete names a finished build that is no longer needed ("" : none).
	Delete string
	// Unconfirmed: the build says it pushed the image but the registry does not show it. State
	// BuildFailed (the user may have to act if it lasts), but it may be a registry or mirror that
	// has not caught up yet: callers should not take it for a failure that lasts, and should look
	// again (the SpecialResource controller waits, and looks again after its RetryDelay).
	Unconfirmed bool
	// Refused is the registry's answer when it refused the pull Secret's credentials, or
	// anonymous access when there is none (HTTP 401 or 403); the state is then Unknown and the
	// message says so. Waiting does not change it: the Secret, or the spec naming none, must.
	Refused error
	// Invalid is why the image, as rendered for the kernel, is not a reference the registry can be
	// asked about (a kernel with a '+', an empty tag); the state is then Unknown and the message
	// names the spec field and the kernel. Waiting does not change it: the spec must.
	Invalid error
}

// Check asks the registry for the image; when it is missing, it follows the image's build, or
// asks for one to start when there is a source to build from. An error is unexpected (the API
// server failed); a registry that cannot be asked is a Result of state Unknown, and so is an image
// that is not a valid reference (Invalid).
func Check(ctx context.Context, reg image.Registry, b build.Builder, in Input) (Result, error) {
	if err := validReference(in); err != nil {
		return Result{State: sro.ImageUnknown, Message: err.Error(), Invalid: err}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	exists, err := reg.Exists(rctx, in.Image, in.PullSecret)
	if err != nil {
		if RefusedCredentials(err) {
			return Result{State: sro.ImageUnknown, Message: RefusalMessage(in.PullSecret, in.Image, err), Refused: err}, nil
		}
		return Result{State: sro.ImageUnknown, Message: "the registry could not be asked: " + RegistryError(err)}, nil
	}
	args := build.Args(in.SR, in.Kernel)
	name := BuildName(in)
	st, found, err := b.Status(ctx, in.Namespace, name)
	if err != nil {
		return Result{}, err
	}
	if exists {
		// A build that produced it is no longer needed (a failed one is kept for its logs).
		res := Result{State: sro.ImageExists}
		if found && st.Phase == build.Succeeded {
			res.Delete = name
		}
		return res, nil
	}
	git := in.SR.Spec.DriverContainer.Source.Git
	if git == nil {
		return Result{State: sro.ImageMissing,
			Message: "image " + in.Image + " is not in the registry and spec.driverContainer.source gives nothing to build it from"}, nil
	}
	building := "building (" + b.Kind() + " " + name + ")"
	switch {
	case !found:
		return Result{State: sro.ImageBuilding, Message: building, Start: &build.Request{Owner: in.SR, Namespace: in.Namespace, Name: name,
			Kernel: in.Kernel, Image: in.Image, Git: *git, BuildArgs: args, PushSecret: in.SR.Spec.DriverContainer.PullSecret,
			PushSecretKey: image.ConfigKey(in.PullSecret), Artifacts: in.SR.Spec.DriverContainer.Artifacts}}, nil
	case st.Phase == build.Running:
		return Result{State: sro.ImageBuilding, Message: building}, nil
	case st.Phase == build.Failed:
		return Result{State: sro.ImageBuildFailed, Message: st.Message + " (change an input, or delete the " + b.Kind() + ", to build again)"}, nil
	}
	// The build says it pushed, the registry says it has nothing (yet: a mirror may catch up).
	return Result{State: sro.ImageBuildFailed, Message: b.Kind() + " " + name + " succeeded, but the registry does not show " + in.Image + " yet", Unconfirmed: true}, nil
}

// validReference checks that the image rendered for the kernel is a reference with a tag or
// digest. The webhook checks the templates with a sample kernel only: a node's kernel may not fit
// in a tag ("6.1.21-v8+"), or a template may render an empty one. Not a registry to wait for: the
// error names the field the image comes from and the kernel.
func validReference(in Input) error {
	if _, err := image.ParseReference(in.Image); err == nil {
		return nil
	}
	_, field, err := image.Pick(in.SR.Spec.DriverContainer, in.Kernel)
	if err != nil {
		return err // the image was picked from the same mappings: not expected
	}
	return fmt.Errorf("%s: renders to %q for kernel %s, which is not a valid image reference with a tag or digest", field, in.Image, in.Kernel)
}

// PullSecretField is the spec field of the pull Secret, named by the messages about it.
const PullSecretField = "spec.driverContainer.pullSecret"

// PullSecret reads the pull Secret name in namespace (nil, "" when name is empty) with reader (the
// API server: the operator caches only its own Secrets). problem says, naming PullSecretField and
// the Secret (never its content), why it cannot be used: it does not exist, or it is not a docker
// config (neither .dockerconfigjson nor .dockercfg, or not valid JSON). That is the user's input
// to fix, not a registry to wait for: handed to the registry client, such a Secret fails every
// lookup as a registry that cannot be asked. The SpecialResource controller and the preflight
// check both read it here, so that they say the same.
func PullSecret(ctx context.Context, reader client.Reader, namespace, name string) (secret *corev1.Secret, problem string, err error) {
	if name == "" {
		return nil, "", nil
	}
	secret = &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("%s: Secret %s/%s not found", PullSecretField, namespace, name), nil
	} else if err != nil {
		return nil, "", fmt.Errorf("reading pull Secret %s/%s: %w", namespace, name, err)
	}
	if _, err := image.Keychain(secret); err != nil {
		return nil, message.Sanitize(PullSecretField + ": " + err.Error()), nil
	}
	return secret, "", nil
}

// RefusedCredentials: the registry answered 401 Unauthorized or 403 Forbidden.
func RefusedCredentials(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden)
}

// RefusalMessage says what the registry refused: the pull Secret's credentials, or (none set)
// anonymous access, which needs one. Registries that hide which repositories exist (Docker Hub,
// say) also answer 401 to an anonymous request for an image that does not exist.
func RefusalMessage(secret *corev1.Secret, img string, refused error) string {
	if secret == nil {
		return fmt.Sprintf("%s: not set, and the registry refused anonymous access to image %s: %s (a private image needs a pull Secret, or the image does not exist)",
			PullSecretField, img, RegistryError(refused))
	}
	if !image.HasCredentials(secret, img) {
		return fmt.Sprintf("%s: Secret %s/%s has no credentials for image %s (no auths key names its registry or repository), and the registry refused anonymous access: %s",
			PullSecretField, secret.Namespace, secret.Name, img, RegistryError(refused))
	}
	return fmt.Sprintf("%s: the registry refused the credentials of Secret %s/%s for image %s: %s",
		PullSecretField, secret.Namespace, secret.Name, img, RegistryError(refused))
}

// BuildName is the name of the build that makes in's image (whether or not it exists).
func BuildName(in Input) string {
	return build.Name(in.SR, in.Kernel, in.Image, build.Args(in.SR, in.Kernel))
}

// RegistryError summarises a registry failure for status: the HTTP status and the registry's
// error codes, not the response body or the URL (which may carry tokens). Any other failure (the
// registry unreachable, TLS) is the error's text with the URL of each failed request removed,
// keeping the operation and the cause ("Get request: dial tcp 10.0.0.1:443: connect: connection
// refused").
func RegistryError(err error) string {
	var terr *transport.Error
	if errors.As(err, &terr) {
		codes := make([]string, 0, len(terr.Errors))
		for _, d := range terr.Errors {
			codes = append(codes, string(d.Code))
		}
		msg := fmt.Sprintf("HTTP %d %s", terr.StatusCode, http.StatusText(terr.StatusCode))
		if len(codes) > 0 {
			msg += " (" + strings.Join(codes, ", ") + ")"
		}
		return msg
	}
	return strings.Join(strings.Fields(requestURL.ReplaceAllString(err.Error(), "$1 request")), " ")
}

// requestURL is a failed request as *url.Error prints it: the operation ("Get", "Head") and the
// quoted URL. The text is searched rather than the error chain: go-containerregistry joins the
// errors of its HTTPS and HTTP attempts in a type that errors.As sees only the first of.
var requestURL = regexp.MustCompile(`\b([A-Z][a-z]+) "[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^"\\]|\\.)*"`)
