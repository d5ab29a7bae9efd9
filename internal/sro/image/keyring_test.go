package image

import (
	"testing"

	"github.com/docker/cli/cli/config/types"
)

// TestCredentialsFor: a pull Secret's key is matched as the kubelet matches it (the kubelet pulls
// the driver image with the same Secret), so that a Secret that works for the pull is not called
// refused by the lookup.
func TestCredentialsFor(t *testing.T) {
	auths := func(keys ...string) map[string]types.AuthConfig {
		m := map[string]types.AuthConfig{}
		for _, k := range keys {
			m[k] = types.AuthConfig{Username: k}
		}
		return m
	}
	tests := []struct {
		name string
		keys []string
		repo string
		want string // the key whose entry is used; "" for none
	}{
		{"exact host", []string{"quay.io"}, "quay.io/vendor/kmod", "quay.io"},
		{"https scheme", []string{"https://quay.io"}, "quay.io/vendor/kmod", "https://quay.io"},
		{"http scheme and port", []string{"http://10.0.0.5:5000"}, "10.0.0.5:5000/kmod", "http://10.0.0.5:5000"},
		{"v2 API suffix", []string{"https://registry.example.com/v2/"}, "registry.example.com/vendor/kmod", "https://registry.example.com/v2/"},
		{"v1 API suffix without scheme", []string{"registry.example.com/v1/"}, "registry.example.com/kmod", "registry.example.com/v1/"},
		{"repository path", []string{"quay.io/vendor"}, "quay.io/vendor/kmod", "quay.io/vendor"},
		{"repository path elsewhere", []string{"quay.io/other"}, "quay.io/vendor/kmod", ""},
		{"most specific path first", []string{"quay.io", "quay.io/vendor"}, "quay.io/vendor/kmod", "quay.io/vendor"},
		{"wildcard host", []string{"*.example.com"}, "registry.example.com/kmod", "*.example.com"},
		{"wildcard is one label", []string{"*.example.com"}, "a.registry.example.com/kmod", ""},
		{"other port", []string{"registry.example.com:5000"}, "registry.example.com/kmod", ""},
		{"other host", []string{"quay.io"}, "ghcr.io/vendor/kmod", ""},
		{"docker hub as docker login writes it", []string{"https://index.docker.io/v1/"}, "index.docker.io/vendor/kmod", "https://index.docker.io/v1/"},
		{"docker hub as podman login writes it", []string{"docker.io"}, "index.docker.io/vendor/kmod", "docker.io"},
		{"index.docker.io is not another registry's", []string{"https://index.docker.io/v1/"}, "quay.io/vendor/kmod", ""},
		{"same place written twice: normalised form wins", []string{"https://quay.io/v2/", "quay.io"}, "quay.io/vendor/kmod", "quay.io"},
		{"unparsable key skipped", []string{"%zz", "quay.io"}, "quay.io/vendor/kmod", "quay.io"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ac, ok := credentialsFor(auths(tc.keys...), tc.repo)
			if got := ac.Username; got != tc.want || ok != (tc.want != "") {
				t.Errorf("credentialsFor(%v, %s) = %q, %v; want %q", tc.keys, tc.repo, got, ok, tc.want)
			}
		})
	}
}
