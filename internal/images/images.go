// Package images builds the project's container images as OCI image layouts, offline: each binary
// is compiled static (CGO_ENABLED=0) and put in one layer on an empty base, with
// go-containerregistry writing the layout (no Docker engine, no registry: ko would need a base
// image from a registry, and a Dockerfile a daemon). An image whose binary runs a program no Go
// library replaces (the image-customization-controller runs nmcli) gets a layer below it with that
// program as the building machine has it installed, and the shared libraries it loads. The cluster-baremetal-operator's image carries
// the release manifests in /manifests and the io.openshift.release.operator label, which is how
// OpenShift's release tooling finds the operators of a payload.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is one image.
type Spec struct {
	// Name is the image's name (and the layout directory's).
	Name string
	// Package is the Go main package, built to Binary.
	Package string
	Binary  string
	// Files are more files: path in the image → content.
	Files map[string][]byte
	// Labels are the image config's labels.
	Labels map[string]string
	// User runs the entrypoint ("" root).
	User string
	// HostPrograms are programs the binary runs, copied from the machine that builds the image
	// (found on its PATH, kept at the same path) with the shared libraries and loader `ldd` lists
	// for them, into a layer below the binary's.
	HostPrograms []string
}

// BinDir is where binaries go in every image.
const BinDir = "/usr/local/bin"

// nonRoot is the nobody user (OpenShift's restricted SCC assigns its own UID anyway).
const nonRoot = "65534:65534"

// Specs are the project's images. manifests are the release manifests for the operator's image
// (name → content); nil leaves them out.
func Specs(manifests map[string][]byte) []Spec {
	files := map[string][]byte{}
	for name, data := range manifests {
		files["/manifests/"+name] = data
	}
	return []Spec{
		{Name: "cluster-baremetal-operator", Package: "./cmd/cluster-baremetal-operator", Binary: BinDir + "/cluster-baremetal-operator",
			Files: files, User: nonRoot,
			Labels: map[string]string{"io.openshift.release.operator": "true", "io.k8s.display-name": "cluster-baremetal-operator"}},
		{Name: "baremetal-operator", Package: "./cmd/baremetal-operator", Binary: BinDir + "/baremetal-operator", User: nonRoot,
			Labels: map[string]string{"io.k8s.display-name": "baremetal-operator"}},
		// The controller writes the hosts' NetworkManager keyfiles with nmcli (NetworkManager 1.42
		// or later, its offline mode): the image carries the building machine's (Debian bookworm's
		// network-manager package in CI). It runs as root: its image cache is a directory of the
		// node (a hostPath), as the metal3 pod's are.
		{Name: "image-customization-controller", Package: "./cmd/image-customization-controller",
			Binary: BinDir + "/image-customization-controller", HostPrograms: []string{"nmcli"},
			Labels: map[string]string{"io.k8s.display-name": "image-customization-controller"}},
		// Deployed on its own (config/sro), not by the cluster-baremetal-operator.
		{Name: "special-resource-operator", Package: "./cmd/special-resource-operator", Binary: BinDir + "/special-resource-operator", User: nonRoot,
			Labels: map[string]string{"io.k8s.display-name": "special-resource-operator"}},
		// The Ironic runner alone: the Ironic image is this layer on a root with Ironic installed
		// (the tests use the Debian sid root hack/ironic-up.sh builds).
		{Name: "ironic-runner", Package: "./cmd/ironic-runner", Binary: BinDir + "/ironic-runner",
			Labels: map[string]string{"io.k8s.display-name": "ironic-runner"}},
	}
}

// Build compiles each spec's binary (from the module at root) and writes one OCI layout per image
// under out/<name>, tagged latest. It returns the layout paths by name.
func Build(ctx context.Context, root, out string, specs []Spec) (map[string]string, error) {
	paths := map[string]string{}
	bin, err := os.MkdirTemp("", "metalforge-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	for _, s := range specs {
		exe := filepath.Join(bin, s.Name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", exe, s.Package)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w\n%s", s.Package, err, b)
		}
		data, err := os.ReadFile(exe)
		if err != nil {
			return nil, err
		}
		img, err := Image(s, data)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.Name, err)
		}
		p := filepath.Join(out, s.Name)
		if err := os.RemoveAll(p); err != nil {
			return nil, err
		}
		lp, err := layout.Write(p, empty.Index)
		if err != nil {
			return nil, fmt.Errorf("writing the layout of %s: %w", s.Name, err)
		}
		if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "latest"})); err != nil {
			return nil, fmt.Errorf("writing image %s: %w", s.Name, err)
		}
		paths[s.Name] = p
	}
	return paths, nil
}

// Image is the image of a spec with its compiled binary.
func Image(s Spec, binary []byte) (v1.Image, error) {
	files := map[string]file{s.Binary: {data: binary, mode: 0o755}}
	for name, data := range s.Files {
		files[name] = file{data: data, mode: 0o644}
	}
	var layers []v1.Layer
	if len(s.HostPrograms) > 0 {
		programs, err := hostProgramFiles(s.HostPrograms)
		if err != nil {
			return nil, err
		}
		layer, err := tarLayer(programs)
		if err != nil {
			return nil, err
		}
		layers = append(layers, layer)
	}
	layer, err := tarLayer(files)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), append(layers, layer)...)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = []string{s.Binary}
	cfg.Config.Labels = s.Labels
	cfg.Config.User = s.User
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return mutate.ConfigFile(img, cfg)
}

type file struct {
	data []byte
	mode int64
}

// tarLayer is one layer holding files and their parent directories, with fixed times and owners,
// so the same binary always gives the same digest.
func tarLayer(files map[string]file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		var parents []string
		for d := path.Dir(n); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		f := files[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n[1:], Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// Extract unpacks an image's filesystem (all layers, flattened) into dir: what a container
// runtime would run. Used by the end-to-end test, which runs the images' content as processes.
func Extract(layoutPath, dir string) error {
	lp, err := layout.FromPath(layoutPath)
	if err != nil {
		return err
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		return fmt.Errorf("no image in %s: %w", layoutPath, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // our own images
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}
