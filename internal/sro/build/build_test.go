package build

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

func TestGitContext(t *testing.T) {
	for in, want := range map[sro.GitSource]string{
		{URI: "https://github.com/acme/kmod.git", Ref: "main"}:              "git://github.com/acme/kmod.git#refs/heads/main",
		{URI: "https://github.com/acme/kmod.git"}:                           "git://github.com/acme/kmod.git",
		{URI: "git://example/kmod", Ref: "refs/tags/v1"}:                    "git://example/kmod#refs/tags/v1",
		{URI: "http://example/kmod", Ref: strings.Repeat("ab", 20)}:         "git://example/kmod#" + strings.Repeat("ab", 20),
		{URI: "https://example/kmod", Ref: strings.Repeat("ab", 19) + "zz"}: "git://example/kmod#refs/heads/" + strings.Repeat("ab", 19) + "zz",
		// Not guessed (the API and the user guide say so): a bare tag or a short commit is a
		// branch; they are written refs/tags/<tag> and as the full 40-character id.
		{URI: "https://example/kmod", Ref: "v1.0"}:           "git://example/kmod#refs/heads/v1.0",
		{URI: "https://example/kmod", Ref: "refs/tags/v1.0"}: "git://example/kmod#refs/tags/v1.0",
		{URI: "https://example/kmod", Ref: "abc1234"}:        "git://example/kmod#refs/heads/abc1234",
	} {
		if got := gitContext(in); got != want {
			t.Errorf("gitContext(%+v) = %q, want %q", in, got, want)
		}
	}
}

// TestName: the same inputs give the same build; each input that changes the image gives
// another one; the name is a DNS label.
func TestName(t *testing.T) {
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("long-name-", 6)},
		Spec: sro.SpecialResourceSpec{Version: "1", DriverContainer: sro.SpecialResourceDriverContainer{
			Source: sro.DriverContainerSource{Git: &sro.GitSource{URI: "u", Ref: "r"}}}}}
	args := []sro.BuildArg{{Name: "A", Value: "1"}}
	base := Name(sr, "k1", "img:1", args)
	if errs := validation.IsDNS1123Label(base); len(errs) > 0 {
		t.Fatalf("%q: %v", base, errs)
	}
	if Name(sr, "k1", "img:1", slices.Clone(args)) != base {
		t.Fatal("same inputs, different name")
	}
	version := sr.DeepCopy()
	version.Spec.Version = "2"
	ref := sr.DeepCopy()
	ref.Spec.DriverContainer.Source.Git.Ref = "other"
	with := func(change func(dc *sro.SpecialResourceDriverContainer)) string {
		c := sr.DeepCopy()
		change(&c.Spec.DriverContainer)
		return Name(c, "k1", "img:1", args)
	}
	for what, name := range map[string]string{
		"pull Secret": with(func(dc *sro.SpecialResourceDriverContainer) { dc.PullSecret = "push" }),
		"host path": with(func(dc *sro.SpecialResourceDriverContainer) {
			dc.Artifacts.HostPaths = []sro.HostPathArtifact{{SourcePath: "/opt", DestinationDir: "/x"}}
		}),
		"claim": with(func(dc *sro.SpecialResourceDriverContainer) {
			dc.Artifacts.Claims = []sro.ClaimArtifact{{Name: "sources", MountPath: "/src"}}
		}),
		"artifact image pull Secret": with(func(dc *sro.SpecialResourceDriverContainer) {
			dc.Artifacts.Images = []sro.ImageArtifact{{Name: "fw:1", PullSecret: "vendor"}}
		}),
		"kernel":  Name(sr, "k2", "img:1", args),
		"image":   Name(sr, "k1", "img:2", args),
		"arg":     Name(sr, "k1", "img:1", []sro.BuildArg{{Name: "A", Value: "2"}}),
		"version": Name(version, "k1", "img:1", args),
		"ref":     Name(ref, "k1", "img:1", args),
	} {
		if name == base {
			t.Errorf("a changed %s keeps the build name", what)
		}
	}
}

func TestJobSpec(t *testing.T) {
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod", UID: "u1"}}
	req := Request{Owner: sr, Namespace: "ns", Name: "b", Kernel: "6.1.0+rt", Image: "r/kmod:6.1.0",
		Git: sro.GitSource{URI: "https://g/kmod", Ref: "v1"}, BuildArgs: Args(sr, "6.1.0+rt"), PushSecret: "pull",
		Artifacts: sro.DriverContainerArtifacts{
			HostPaths: []sro.HostPathArtifact{{SourcePath: "/run/vendor/src", DestinationDir: "/usr/src/"}},
			Claims:    []sro.ClaimArtifact{{Name: "vendor-pvc", MountPath: "/usr/src/vendor"}},
		}}
	job := Job{}.job(req)
	c := job.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--context=git://g/kmod#refs/heads/v1", "--destination=r/kmod:6.1.0", "--build-arg=KERNEL_FULL_VERSION=6.1.0+rt", "--build-arg=MOD_NAME=kmod"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if c.Image != DefaultJobImage || len(c.VolumeMounts) != 3 || c.VolumeMounts[0].MountPath != "/kaniko/.docker" || c.VolumeMounts[1].MountPath != "/usr/src" {
		t.Errorf("image %s mounts %+v", c.Image, c.VolumeMounts)
	}
	if job.Labels[BuildLabel] == "" || job.Labels[sro.OwnedLabel] != "kmod" || job.OwnerReferences[0].UID != "u1" || job.Annotations[sro.KernelAnnotation] != "6.1.0+rt" {
		t.Errorf("labels %v owners %v annotations %v", job.Labels, job.OwnerReferences, job.Annotations)
	}
	if errs := validation.IsValidLabelValue(job.Labels[BuildLabel]); len(errs) > 0 {
		t.Errorf("build label %q: %v", job.Labels[BuildLabel], errs)
	}
	if err := (OpenShift{}).Start(t.Context(), req); !errors.Is(err, ErrVolumesUnsupported) {
		t.Errorf("OpenShift build with volumes: %v", err)
	}
}

// TestJobGitPullMethod: kaniko clones a git context over https unless GIT_PULL_METHOD says
// http, so a Job for an http:// source says it and one for https:// leaves the default.
func TestJobGitPullMethod(t *testing.T) {
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod", UID: "u1"}}
	for uri, want := range map[string]string{"http://gitea.lab/kmod.git": "http", "https://g/kmod": "", "git://g/kmod": ""} {
		job := Job{}.job(Request{Owner: sr, Namespace: "ns", Name: "b", Kernel: "6.1.0", Image: "r/kmod:6.1.0", Git: sro.GitSource{URI: uri}})
		got := ""
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GIT_PULL_METHOD" {
				got = e.Value
			}
		}
		if got != want {
			t.Errorf("%s: GIT_PULL_METHOD %q, want %q", uri, got, want)
		}
	}
}

// TestOpenShiftVolumesNamed: the refusal of an OpenShift build names the artifacts fields that
// are set, so that status and events say which one to remove.
func TestOpenShiftVolumesNamed(t *testing.T) {
	hostPaths := []sro.HostPathArtifact{{SourcePath: "/run/vendor/src", DestinationDir: "/usr/src/"}}
	claims := []sro.ClaimArtifact{{Name: "vendor-pvc", MountPath: "/usr/src/vendor"}}
	for _, tc := range []struct {
		name      string
		artifacts sro.DriverContainerArtifacts
		want      string
	}{
		{"host paths", sro.DriverContainerArtifacts{HostPaths: hostPaths}, "(spec.driverContainer.artifacts.hostPaths set)"},
		{"claims", sro.DriverContainerArtifacts{Claims: claims}, "(spec.driverContainer.artifacts.claims set)"},
		{"both", sro.DriverContainerArtifacts{HostPaths: hostPaths, Claims: claims},
			"(spec.driverContainer.artifacts.hostPaths and spec.driverContainer.artifacts.claims set)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := volumesSet(tc.artifacts)
			if !errors.Is(err, ErrVolumesUnsupported) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrVolumesUnsupported ending %q", err, tc.want)
			}
		})
	}
	if err := volumesSet(sro.DriverContainerArtifacts{Images: []sro.ImageArtifact{{Name: "r/base:1"}}}); err != nil {
		t.Errorf("images only: %v", err)
	}
}

// TestJobPushSecretKey: a Job build mounts the pull Secret's .dockerconfigjson as kaniko's
// config.json; a legacy .dockercfg Secret is refused before anything is created (a Secret volume
// of a missing key never mounts: the Job would run for ever), naming the field and the Secret.
func TestJobPushSecretKey(t *testing.T) {
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod", UID: "u1"}}
	base := Request{Owner: sr, Namespace: "ns", Name: "b", Kernel: "k", Image: "r/kmod:k", Git: sro.GitSource{URI: "https://g/kmod"}}
	const refusal = "spec.driverContainer.pullSecret: Secret ns/pull has no .dockerconfigjson key (only .dockercfg): " +
		"a Job (kaniko) build needs a kubernetes.io/dockerconfigjson Secret"
	for name, tc := range map[string]struct {
		secret, key string
		want        string
	}{
		"no Secret":        {},
		"dockerconfigjson": {secret: "pull", key: corev1.DockerConfigJsonKey},
		"key not known":    {secret: "pull"},
		"legacy dockercfg": {secret: "pull", key: corev1.DockerConfigKey, want: refusal},
	} {
		t.Run(name, func(t *testing.T) {
			req := base
			req.PushSecret, req.PushSecretKey = tc.secret, tc.key
			err := pushSecretUsable(req)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrDockerConfigJSONNeeded) || !Refused(err) {
				t.Fatalf("got %v, want %q (ErrDockerConfigJSONNeeded, Refused)", err, tc.want)
			}
			// Refused before the client is used: a Job with no client would panic creating it.
			if err := (Job{}).Start(t.Context(), req); err == nil || err.Error() != tc.want {
				t.Fatalf("Start: %v", err)
			}
		})
	}
}

// TestRefused: the refusals, however wrapped, are Refused; other failures of Start are not.
func TestRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"none":            {err: nil},
		"volumes":         {err: volumesSet(sro.DriverContainerArtifacts{Claims: []sro.ClaimArtifact{{Name: "c", MountPath: "/m"}}}), want: true},
		"dockercfg":       {err: fmt.Errorf("starting: %w", ErrDockerConfigJSONNeeded), want: true},
		"API server down": {err: errors.New("creating build Job ns/b: connection refused")},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Refused(tc.err); got != tc.want {
				t.Errorf("Refused(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
