package host

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// registryCredentials reads the credentials for an oci:// image's registry from a docker
// configuration Secret (spec.image.ociAuthSecretName: kubernetes.io/dockerconfigjson, or the
// older kubernetes.io/dockercfg), in the form Ironic takes as instance_info image_pull_secret:
// "user:password", or a token alone. metal3 passes the same. Errors name what is wrong, never a
// credential.
func registryCredentials(secret *corev1.Secret, imageURL string) (string, error) {
	u, err := url.Parse(imageURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the image URL names no registry")
	}
	registry := u.Host
	var auths map[string]dockerAuth
	switch {
	case len(secret.Data[corev1.DockerConfigJsonKey]) > 0:
		var cfg struct {
			Auths map[string]dockerAuth `json:"auths"`
		}
		if err := json.Unmarshal(secret.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return "", fmt.Errorf("key %s is not a docker configuration (JSON)", corev1.DockerConfigJsonKey)
		}
		auths = cfg.Auths
	case len(secret.Data[corev1.DockerConfigKey]) > 0:
		if err := json.Unmarshal(secret.Data[corev1.DockerConfigKey], &auths); err != nil {
			return "", fmt.Errorf("key %s is not a docker configuration (JSON)", corev1.DockerConfigKey)
		}
	default:
		return "", fmt.Errorf("has neither a %s nor a %s key", corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
	}
	for key, a := range auths {
		if registryOf(key) != registry {
			continue
		}
		return a.credentials()
	}
	return "", fmt.Errorf("has no credentials for registry %s", registry)
}

// dockerAuth is one registry's entry of a docker configuration.
type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

func (a dockerAuth) credentials() (string, error) {
	switch {
	case a.Username != "" && a.Password != "":
		return a.Username + ":" + a.Password, nil
	case a.Auth != "":
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil || !strings.Contains(string(raw), ":") {
			return "", fmt.Errorf("has an auth entry that is not base64 of user:password")
		}
		return string(raw), nil
	case a.RegistryToken != "":
		return a.RegistryToken, nil
	case a.IdentityToken != "":
		return a.IdentityToken, nil
	}
	return "", fmt.Errorf("has an empty entry")
}

// registryOf is the host[:port] a docker configuration key names: keys may be a bare host, a URL
// (https://registry.example/v1/) or a host with a path.
func registryOf(key string) string {
	if _, rest, ok := strings.Cut(key, "://"); ok {
		key = rest
	}
	host, _, _ := strings.Cut(key, "/")
	return host
}
