package pullorbuild

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
)

type registry struct {
	exists bool
	err    error
}

func (r registry) Exists(context.Context, string, *corev1.Secret) (bool, error) {
	return r.exists, r.err
}

// builder is a hand-written fake of the build backend: one build, in the given state.
type builder struct {
	found bool
	st    build.Status
}

func (builder) Start(context.Context, build.Request) error { return nil }
func (b builder) Status(context.Context, string, string) (build.Status, bool, error) {
	return b.st, b.found, nil
}
func (builder) Delete(context.Context, string, string) error { return nil }
func (builder) Kind() string                                 { return "Job" }

// TestCheck: one row per outcome of pull-or-build.
func TestCheck(t *testing.T) {
	withSource := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod"}, Spec: sro.SpecialResourceSpec{
		DriverContainer: sro.SpecialResourceDriverContainer{Source: sro.DriverContainerSource{Git: &sro.GitSource{URI: "https://g/k.git"}}}}}
	noSource := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod"}}
	unauthorized := &transport.Error{StatusCode: http.StatusUnauthorized, Errors: []transport.Diagnostic{{Code: transport.UnauthorizedErrorCode, Message: "token=abc"}}}
	tests := map[string]struct {
		sr      *sro.SpecialResource
		reg     registry
		b       builder
		state   sro.ImageState
		start   bool
		delete  bool
		message string
	}{
		"pulled":                              {sr: withSource, reg: registry{exists: true}, state: sro.ImageExists},
		"pulled; its finished build goes":     {sr: withSource, reg: registry{exists: true}, b: builder{found: true, st: build.Status{Phase: build.Succeeded}}, state: sro.ImageExists, delete: true},
		"pulled; a failed build is kept":      {sr: withSource, reg: registry{exists: true}, b: builder{found: true, st: build.Status{Phase: build.Failed}}, state: sro.ImageExists},
		"missing, nothing to build from":      {sr: noSource, state: sro.ImageMissing, message: "nothing to build it from"},
		"missing: build it":                   {sr: withSource, state: sro.ImageBuilding, start: true},
		"building":                            {sr: withSource, b: builder{found: true, st: build.Status{Phase: build.Running}}, state: sro.ImageBuilding},
		"build failed":                        {sr: withSource, b: builder{found: true, st: build.Status{Phase: build.Failed, Message: "exit 2"}}, state: sro.ImageBuildFailed, message: "exit 2"},
		"build succeeded, registry empty":     {sr: withSource, b: builder{found: true, st: build.Status{Phase: build.Succeeded}}, state: sro.ImageBuildFailed, message: "succeeded, but the registry does not show r/kmod:k yet"},
		"registry refuses: no body, no token": {sr: withSource, reg: registry{err: unauthorized}, state: sro.ImageUnknown, message: "HTTP 401 Unauthorized (UNAUTHORIZED)"},
		"registry unreachable":                {sr: withSource, reg: registry{err: errors.New("dial tcp 10.0.0.1:5000: connect: connection refused")}, state: sro.ImageUnknown, message: "connection refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Check(context.Background(), tc.reg, tc.b, Input{SR: tc.sr, Namespace: "ns", Kernel: "k", Image: "r/kmod:k"})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != tc.state || (res.Start != nil) != tc.start || (res.Delete != "") != tc.delete || !strings.Contains(res.Message, tc.message) {
				t.Fatalf("got %+v, want %s start %v delete %v %q", res, tc.state, tc.start, tc.delete, tc.message)
			}
			if res.Unconfirmed != (name == "build succeeded, registry empty") {
				t.Fatalf("unconfirmed %v: only a succeeded build whose image the registry lacks is", res.Unconfirmed)
			}
			if strings.Contains(res.Message, "token=abc") {
				t.Fatalf("the registry's error body reached the message: %q", res.Message)
			}
			if tc.start && (res.Start.Kernel != "k" || res.Start.Image != "r/kmod:k" || res.Start.Git.URI != "https://g/k.git") {
				t.Fatalf("build request %+v", res.Start)
			}
		})
	}
}

// TestCheckInvalidReference: an image that renders, for a node's kernel, to something that is not
// a reference (the webhook checked a sample kernel only) is the spec's problem, not a registry to
// wait for: Invalid, with a message naming the field the image comes from and the kernel; the
// registry is not asked.
func TestCheckInvalidReference(t *testing.T) {
	sr := func(mappings ...sro.KernelMapping) *sro.SpecialResource {
		return &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod"}, Spec: sro.SpecialResourceSpec{
			DriverContainer: sro.SpecialResourceDriverContainer{Image: "reg/x:{{.KernelFullVersion}}", KernelMappings: mappings}}}
	}
	tests := map[string]struct {
		sr      *sro.SpecialResource
		kernel  string
		image   string
		message string
	}{
		"a '+' in the kernel": {sr: sr(), kernel: "6.1.21-v8+", image: "reg/x:6.1.21-v8+",
			message: `spec.driverContainer.image: renders to "reg/x:6.1.21-v8+" for kernel 6.1.21-v8+, which is not a valid image reference with a tag or digest`},
		"an empty tag": {sr: sr(), kernel: "k", image: "reg/x:",
			message: `spec.driverContainer.image: renders to "reg/x:" for kernel k, which is not a valid image reference with a tag or digest`},
		"from a kernel mapping": {sr: sr(sro.KernelMapping{Literal: "k0"}, sro.KernelMapping{Regexp: `.*\+`, Image: "reg/rpi:{{.KernelFullVersion}}"}), kernel: "6.1.21-v8+", image: "reg/rpi:6.1.21-v8+",
			message: `spec.driverContainer.kernelMappings[1].image: renders to "reg/rpi:6.1.21-v8+" for kernel 6.1.21-v8+`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Check(context.Background(), registry{exists: true}, builder{}, Input{SR: tc.sr, Namespace: "ns", Kernel: tc.kernel, Image: tc.image})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != sro.ImageUnknown || res.Invalid == nil || res.Refused != nil || res.Start != nil || !strings.HasPrefix(res.Message, tc.message) {
				t.Fatalf("got %+v, want Unknown, Invalid, %q", res, tc.message)
			}
		})
	}
}

// TestBuildRequestSecretKey: the build request says which docker config key the pull Secret has,
// so that a Job build can refuse a legacy .dockercfg Secret before it starts a pod that never
// mounts it.
func TestBuildRequestSecretKey(t *testing.T) {
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod"}, Spec: sro.SpecialResourceSpec{
		DriverContainer: sro.SpecialResourceDriverContainer{PullSecret: "pull", Source: sro.DriverContainerSource{Git: &sro.GitSource{URI: "https://g/k.git"}}}}}
	secret := func(key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pull"}, Data: map[string][]byte{key: []byte("{}")}}
	}
	for name, tc := range map[string]struct {
		secret *corev1.Secret
		want   string
	}{
		"dockerconfigjson": {secret: secret(corev1.DockerConfigJsonKey), want: corev1.DockerConfigJsonKey},
		"legacy dockercfg": {secret: secret(corev1.DockerConfigKey), want: corev1.DockerConfigKey},
		"none read":        {want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Check(context.Background(), registry{}, builder{}, Input{SR: sr, Namespace: "ns", Kernel: "k", Image: "r/kmod:k", PullSecret: tc.secret})
			if err != nil {
				t.Fatal(err)
			}
			if res.Start == nil || res.Start.PushSecret != "pull" || res.Start.PushSecretKey != tc.want {
				t.Fatalf("build request %+v, want PushSecretKey %q", res.Start, tc.want)
			}
		})
	}
}

// TestRegistryErrorNoURL: a registry that cannot be reached is reported with the operation and
// the cause, never the URL of the request (it may carry user information or a token): for a
// *url.Error however wrapped or joined, and for the error go-containerregistry really returns.
func TestRegistryErrorNoURL(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 443}, Err: errors.New("connect: connection refused")}
	head := &url.Error{Op: "Head", URL: "https://user:pa55@r.example/v2/vendor/kmod/manifests/k?token=s3cr3t", Err: dial}
	get := &url.Error{Op: "Get", URL: `http://r.example/v2/"odd"`, Err: dial}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"url.Error": {err: head, want: "Head request: dial tcp 10.0.0.1:443: connect: connection refused"},
		"wrapped":   {err: fmt.Errorf("looking up image r.example/vendor/kmod:k: %w", head), want: "looking up image r.example/vendor/kmod:k: Head request: dial tcp 10.0.0.1:443: connect: connection refused"},
		"joined":    {err: errors.Join(head, get), want: "Head request: dial tcp 10.0.0.1:443: connect: connection refused Get request: dial tcp 10.0.0.1:443: connect: connection refused"},
		"no URL":    {err: dial, want: "dial tcp 10.0.0.1:443: connect: connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := RegistryError(tc.err); got != tc.want {
				t.Errorf("RegistryError = %q, want %q", got, tc.want)
			}
		})
	}

	// A registry that went away, asked by the real client.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	_, err := image.Remote{}.Exists(context.Background(), addr+"/vendor/kmod:k", nil)
	if err == nil {
		t.Fatal("a closed registry answered")
	}
	got := RegistryError(err)
	if strings.Contains(got, "://") || strings.Contains(got, "/v2/") || !strings.Contains(got, "connection refused") {
		t.Fatalf("RegistryError(%q) = %q: want the cause without the URL", err, got)
	}
}

// TestRefusedCredentials: only 401 and 403 answers, however wrapped, refuse the credentials.
func TestRefusedCredentials(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"none":            {err: nil, want: false},
		"401, wrapped":    {err: fmt.Errorf("looking up image r/x:1: %w", &transport.Error{StatusCode: http.StatusUnauthorized}), want: true},
		"403":             {err: &transport.Error{StatusCode: http.StatusForbidden}, want: true},
		"404":             {err: &transport.Error{StatusCode: http.StatusNotFound}, want: false},
		"503":             {err: &transport.Error{StatusCode: http.StatusServiceUnavailable}, want: false},
		"network failure": {err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused"), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := RefusedCredentials(tc.err); got != tc.want {
				t.Errorf("RefusedCredentials(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestCheckRefused: a registry refusing the credentials is an Unknown image whose Result says so,
// naming the pull Secret field and the Secret (or its absence); another registry failure is not
// a refusal.
func TestCheckRefused(t *testing.T) {
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod"}}
	withKey := func(key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pull"},
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + key + `":{"username":"u","password":"p"}}}`)}}
	}
	// r/kmod:1 is on Docker Hub.
	pull, elsewhere := withKey("docker.io"), withKey("quay.io")
	for name, tc := range map[string]struct {
		err     error
		secret  *corev1.Secret
		refused bool
		message string
	}{
		"401 with a Secret": {err: &transport.Error{StatusCode: http.StatusUnauthorized}, secret: pull, refused: true,
			message: "spec.driverContainer.pullSecret: the registry refused the credentials of Secret ns/pull for image r/kmod:1: HTTP 401 Unauthorized"},
		"401, the Secret has nothing for this registry": {err: &transport.Error{StatusCode: http.StatusUnauthorized}, secret: elsewhere, refused: true,
			message: "spec.driverContainer.pullSecret: Secret ns/pull has no credentials for image r/kmod:1 (no auths key names its registry or repository), and the registry refused anonymous access: HTTP 401 Unauthorized"},
		"403 anonymous": {err: &transport.Error{StatusCode: http.StatusForbidden}, refused: true,
			message: "spec.driverContainer.pullSecret: not set, and the registry refused anonymous access to image r/kmod:1: HTTP 403 Forbidden"},
		"503": {err: &transport.Error{StatusCode: http.StatusServiceUnavailable}, secret: pull,
			message: "the registry could not be asked: HTTP 503 Service Unavailable"},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Check(context.Background(), registry{err: tc.err}, nil, Input{SR: sr, Namespace: "ns", Kernel: "k", Image: "r/kmod:1", PullSecret: tc.secret})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != sro.ImageUnknown || (res.Refused != nil) != tc.refused || !strings.HasPrefix(res.Message, tc.message) {
				t.Fatalf("got %s refused=%v %q, want Unknown refused=%v %q", res.State, res.Refused != nil, res.Message, tc.refused, tc.message)
			}
		})
	}
}
