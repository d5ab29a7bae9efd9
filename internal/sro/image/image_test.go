package image

import (
	"context"
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

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestFor: the first mapping that matches gives the image (Pick names its field), else image.
func TestFor(t *testing.T) {
	dc := sro.SpecialResourceDriverContainer{
		Image: "r/default:{{.KernelFullVersion}}",
		KernelMappings: []sro.KernelMapping{
			{Literal: "6.1.0-special", Image: "r/literal:x"},
			{Regexp: `5\.14\..*el9.*`, Image: "r/el9:{{.KernelFullVersion}}"},
			{Regexp: `.*`, Image: "r/catch-all:x"},
		},
	}
	tests := map[string]struct {
		dc     sro.SpecialResourceDriverContainer
		kernel string
		want   string
		field  string
	}{
		"literal first":        {dc: dc, kernel: "6.1.0-special", want: "r/literal:x", field: "spec.driverContainer.kernelMappings[0].image"},
		"regexp in order":      {dc: dc, kernel: "5.14.0-284.el9.x86_64", want: "r/el9:{{.KernelFullVersion}}", field: "spec.driverContainer.kernelMappings[1].image"},
		"later catch-all":      {dc: dc, kernel: "6.8.0-45-generic", want: "r/catch-all:x", field: "spec.driverContainer.kernelMappings[2].image"},
		"regexp matches whole": {dc: sro.SpecialResourceDriverContainer{Image: "d", KernelMappings: []sro.KernelMapping{{Regexp: "5", Image: "m"}}}, kernel: "5.14", want: "d", field: imageField},
		"no mapping: image":    {dc: sro.SpecialResourceDriverContainer{Image: "d"}, kernel: "x", want: "d", field: imageField},
		"nothing: empty":       {dc: sro.SpecialResourceDriverContainer{KernelMappings: []sro.KernelMapping{{Literal: "a", Image: "m"}}}, kernel: "b", field: imageField},
	}
	for n, tc := range tests {
		t.Run(n, func(t *testing.T) {
			got, err := For(tc.dc, tc.kernel)
			if err != nil || got != tc.want {
				t.Fatalf("For(%s) = %q, %v; want %q", tc.kernel, got, err, tc.want)
			}
			if _, field, _ := Pick(tc.dc, tc.kernel); field != tc.field {
				t.Fatalf("Pick(%s) names %q, want %q", tc.kernel, field, tc.field)
			}
		})
	}
	_, err := For(sro.SpecialResourceDriverContainer{KernelMappings: []sro.KernelMapping{{Regexp: "(", Image: "m"}}}, "k")
	if err == nil || !strings.Contains(err.Error(), "kernelMappings[0].regexp") {
		t.Fatalf("bad regexp: %v", err)
	}
}

func TestParseReference(t *testing.T) {
	for ref, ok := range map[string]bool{
		"registry.example/vendor/kmod:5.14.0-284.el9.x86_64":             true,
		"registry.example/vendor/kmod@sha256:" + strings.Repeat("a", 64): true,
		"registry.example/vendor/kmod":                                   false,
		"registry.example/Vendor/kmod:x":                                 false,
		"":                                                               false,
	} {
		if _, err := ParseReference(ref); (err == nil) != ok {
			t.Errorf("ParseReference(%q): %v, want ok=%v", ref, err, ok)
		}
	}
}

// TestRemoteExists runs a real OCI registry (go-containerregistry's in-process one) behind basic
// authentication and checks presence, absence and credentials from a pull Secret.
func TestRemoteExists(t *testing.T) {
	reg := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "vendor" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	present := host + "/vendor/kmod:5.14.0-284.el9.x86_64"
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(present)
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "vendor", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"username":"vendor","password":"s3cret"}}}`)}}
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old"}, Type: corev1.SecretTypeDockercfg,
		Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"http://` + host + `":{"auth":"dmVuZG9yOnMzY3JldA=="}}`)}}
	keyed := func(key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keyed"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + key + `":{"username":"vendor","password":"s3cret"}}}`)}}
	}
	ctx := context.Background()
	tests := map[string]struct {
		ref     string
		secret  *corev1.Secret
		want    bool
		wantErr string
	}{
		"present":               {ref: present, secret: secret, want: true},
		"legacy dockercfg":      {ref: present, secret: legacy, want: true},
		"key with API suffix":   {ref: present, secret: keyed("https://" + host + "/v2/"), want: true},
		"key with repository":   {ref: present, secret: keyed(host + "/vendor"), want: true},
		"key for another repo":  {ref: present, secret: keyed(host + "/other"), wantErr: "looking up image"},
		"absent tag":            {ref: host + "/vendor/kmod:6.1.0", secret: secret},
		"absent repository":     {ref: host + "/vendor/other:6.1.0", secret: secret},
		"no credentials: error": {ref: present, wantErr: "looking up image"},
		"secret without config": {ref: present, secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}}, wantErr: "pull Secret ns/empty has neither"},
		"garbage is not echoed": {ref: present, secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{hunter2")}}, wantErr: "not a valid docker config"},
	}
	for n, tc := range tests {
		t.Run(n, func(t *testing.T) {
			got, err := Remote{}.Exists(ctx, tc.ref, tc.secret)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error %v, want %q (and no secret in it)", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Exists = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestConfigKey: the key Keychain reads, .dockerconfigjson first, as builds are told it.
func TestConfigKey(t *testing.T) {
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pull"}, Data: data}
	}
	for name, tc := range map[string]struct {
		secret *corev1.Secret
		want   string
	}{
		"none":                    {secret: nil, want: ""},
		"dockerconfigjson":        {secret: secret(map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}")}), want: corev1.DockerConfigJsonKey},
		"legacy dockercfg":        {secret: secret(map[string][]byte{corev1.DockerConfigKey: []byte("{}")}), want: corev1.DockerConfigKey},
		"both: the new one":       {secret: secret(map[string][]byte{corev1.DockerConfigKey: []byte("{}"), corev1.DockerConfigJsonKey: []byte("{}")}), want: corev1.DockerConfigJsonKey},
		"empty .dockerconfigjson": {secret: secret(map[string][]byte{corev1.DockerConfigJsonKey: nil, corev1.DockerConfigKey: []byte("{}")}), want: corev1.DockerConfigKey},
		"neither":                 {secret: secret(map[string][]byte{"token": []byte("x")}), want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ConfigKey(tc.secret); got != tc.want {
				t.Errorf("ConfigKey = %q, want %q", got, tc.want)
			}
		})
	}
}
