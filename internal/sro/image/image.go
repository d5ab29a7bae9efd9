// Package image picks the driver image of a SpecialResource for a kernel and asks the registry
// whether it exists.
//
// The lookup uses go-containerregistry's remote client (a HEAD of the manifest), with the
// credentials of the SpecialResource's pull Secret read by docker/cli's config parser (which
// go-containerregistry already uses for its own keychain). Choosing a maintained client over
// hand-written registry HTTP keeps token auth, redirects and the Docker Hub alias right.
package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// For picks the image template for kernel k from a SpecialResource's driver container: the
// first kernel mapping whose literal equals k or whose regexp matches all of it, else image. It
// returns "" when neither applies. The template is returned as written (rendering is the first
// pass's job); an invalid regexp is an error naming the mapping.
func For(dc sro.SpecialResourceDriverContainer, k string) (string, error) {
	img, _, err := Pick(dc, k)
	return img, err
}

// imageField is the spec field of the driver image template used when no kernel mapping applies.
const imageField = "spec.driverContainer.image"

// Pick is For, also naming the spec field the template comes from (imageField, or
// spec.driverContainer.kernelMappings[i].image), so that a message about the image names it.
func Pick(dc sro.SpecialResourceDriverContainer, k string) (img, field string, err error) {
	for i, m := range dc.KernelMappings {
		field := fmt.Sprintf("spec.driverContainer.kernelMappings[%d].image", i)
		switch {
		case m.Literal != "":
			if m.Literal == k {
				return m.Image, field, nil
			}
		case m.Regexp != "":
			re, err := regexp.Compile("^(?:" + m.Regexp + ")$")
			if err != nil {
				return "", "", fmt.Errorf("spec.driverContainer.kernelMappings[%d].regexp: %w", i, err)
			}
			if re.MatchString(k) {
				return m.Image, field, nil
			}
		}
	}
	return dc.Image, imageField, nil
}

// Used reports whether a driver container names an image at all (a ConfigMap recipe may deploy
// no driver image).
func Used(dc sro.SpecialResourceDriverContainer) bool {
	return dc.Image != "" || len(dc.KernelMappings) > 0
}

// ParseReference parses an image reference, requiring an explicit tag or digest (a driver
// image is per kernel; "latest" by default would hide that — kernel-module-management refuses
// it too). The registry may be left out (Docker Hub), as container runtimes allow.
func ParseReference(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.Contains(last, ":") && !strings.Contains(last, "@") {
		return nil, fmt.Errorf("image %q has no tag or digest", ref)
	}
	return r, nil
}

// Registry looks images up.
type Registry interface {
	// Exists reports whether the registry has the image; a registry that cannot be asked (or
	// refuses the credentials) is an error.
	Exists(ctx context.Context, ref string, pullSecret *corev1.Secret) (bool, error)
}

// Remote is the Registry of real registries (go-containerregistry's remote client).
type Remote struct {
	// Transport is the HTTP transport (http.DefaultTransport when nil); tests use it for TLS.
	Transport http.RoundTripper
	// Insecure lists registries (host[:port]) spoken to over plain HTTP. Loopback and private
	// addresses already are (go-containerregistry's rule).
	Insecure []string
}

// Exists does a HEAD of the image's manifest.
func (r Remote) Exists(ctx context.Context, ref string, pullSecret *corev1.Secret) (bool, error) {
	var opts []name.Option
	if r.insecure(ref) {
		opts = append(opts, name.Insecure)
	}
	if _, err := ParseReference(ref); err != nil {
		return false, err
	}
	parsed, err := name.ParseReference(ref, opts...)
	if err != nil {
		return false, fmt.Errorf("image %q: %w", ref, err)
	}
	kc, err := Keychain(pullSecret)
	if err != nil {
		return false, err
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if r.Transport != nil {
		ropts = append(ropts, remote.WithTransport(r.Transport))
	}
	_, err = remote.Head(parsed, ropts...)
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, fmt.Errorf("looking up image %s: %w", ref, err)
}

func (r Remote) insecure(ref string) bool {
	for _, host := range r.Insecure {
		if strings.HasPrefix(ref, host+"/") {
			return true
		}
	}
	return false
}

// isNotFound: the registry answered that the repository or the manifest does not exist.
func isNotFound(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	if terr.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range terr.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

// Keychain gives the credentials of a pull Secret (kubernetes.io/dockerconfigjson or the older
// kubernetes.io/dockercfg) to go-containerregistry; no Secret means anonymous. Credential
// helpers named in the Secret are ignored: the operator runs no binaries a Secret names.
func Keychain(secret *corev1.Secret) (authn.Keychain, error) {
	if secret == nil {
		return authn.NewMultiKeychain(), nil
	}
	cf, err := dockerConfig(secret)
	if err != nil {
		return nil, err
	}
	return secretKeychain{cf: cf}, nil
}

// dockerConfig parses a pull Secret's docker config, without its credential helpers.
func dockerConfig(secret *corev1.Secret) (*configfile.ConfigFile, error) {
	var data []byte
	switch ConfigKey(secret) {
	case corev1.DockerConfigJsonKey:
		data = secret.Data[corev1.DockerConfigJsonKey]
	case corev1.DockerConfigKey:
		data = append(append([]byte(`{"auths":`), secret.Data[corev1.DockerConfigKey]...), '}')
	default:
		return nil, fmt.Errorf("pull Secret %s/%s has neither %s nor %s", secret.Namespace, secret.Name, corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
	}
	cf, err := config.LoadFromReader(bytes.NewReader(data))
	if err != nil {
		// The parser's error may quote the Secret's content: do not pass it on.
		return nil, fmt.Errorf("pull Secret %s/%s: not a valid docker config", secret.Namespace, secret.Name)
	}
	cf.CredentialsStore, cf.CredentialHelpers = "", nil
	return cf, nil
}

// ConfigKey is the key of the pull Secret whose docker config Keychain reads:
// corev1.DockerConfigJsonKey, else corev1.DockerConfigKey (a legacy kubernetes.io/dockercfg
// Secret), else "" (neither, or no Secret). Builds need to know it: a Job build can only mount the
// first (build.Request.PushSecretKey).
func ConfigKey(secret *corev1.Secret) string {
	switch {
	case secret == nil:
		return ""
	case len(secret.Data[corev1.DockerConfigJsonKey]) > 0:
		return corev1.DockerConfigJsonKey
	case len(secret.Data[corev1.DockerConfigKey]) > 0:
		return corev1.DockerConfigKey
	}
	return ""
}

// HasCredentials reports whether the pull Secret has an entry the kubelet would use for image
// ref (false for no Secret, an unreadable one or an unparsable reference), so that a refusal
// can say whether credentials were sent at all.
func HasCredentials(secret *corev1.Secret, ref string) bool {
	if secret == nil {
		return false
	}
	cf, err := dockerConfig(secret)
	if err != nil {
		return false
	}
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return false
	}
	_, ok := credentialsFor(cf.AuthConfigs, parsed.Context().String())
	return ok
}

type secretKeychain struct{ cf *configfile.ConfigFile }

func (k secretKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	ac, ok := credentialsFor(k.cf.AuthConfigs, target.String())
	if !ok {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: ac.Username, Password: ac.Password, Auth: ac.Auth,
		IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken}), nil
}
