package host

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRegistryCredentials(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))
	secret := func(key, value string) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{key: []byte(value)}}
	}
	for name, tc := range map[string]struct {
		secret *corev1.Secret
		image  string
		want   string
		err    string
	}{
		"dockerconfigjson auth": {secret: secret(".dockerconfigjson", `{"auths":{"registry.example:5000":{"auth":"`+auth+`"}}}`),
			image: "oci://registry.example:5000/os/rhel:9", want: "robot:s3cret"},
		"username and password, URL key": {secret: secret(".dockerconfigjson", `{"auths":{"https://registry.example/v1/":{"username":"u","password":"p"}}}`),
			image: "oci://registry.example/os:1", want: "u:p"},
		"dockercfg": {secret: secret(".dockercfg", `{"registry.example":{"auth":"`+auth+`"}}`),
			image: "oci://registry.example/os:1", want: "robot:s3cret"},
		"a token": {secret: secret(".dockerconfigjson", `{"auths":{"registry.example":{"registrytoken":"tok"}}}`),
			image: "oci://registry.example/os:1", want: "tok"},
		"another registry only": {secret: secret(".dockerconfigjson", `{"auths":{"quay.io":{"auth":"`+auth+`"}}}`),
			image: "oci://registry.example/os:1", err: "no credentials for registry registry.example"},
		"not JSON": {secret: secret(".dockerconfigjson", `{auths`), image: "oci://registry.example/os:1",
			err: "not a docker configuration"},
		"no docker key": {secret: secret("password", "x"), image: "oci://registry.example/os:1", err: "has neither"},
		"auth not user:password": {secret: secret(".dockerconfigjson", `{"auths":{"registry.example":{"auth":"bm9jb2xvbg=="}}}`),
			image: "oci://registry.example/os:1", err: "not base64 of user:password"},
	} {
		got, err := registryCredentials(tc.secret, tc.image)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: error %v, want one saying %q (and no credential)", name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, tc.want)
		}
	}
}
