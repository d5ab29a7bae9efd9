package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalforge/metalforge/internal/release"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// TestMakeImages builds the images as `make images` does (go run ./hack/images) and inspects them
// with skopeo, a tool that shares no code with the builder: every image's entrypoint is an
// executable in its layer, the operator's image is labelled io.openshift.release.operator=true
// and carries manifests/ in /manifests, byte for byte.
func TestMakeImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries")
	}
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Skip("skopeo is not installed (make test installs it: apt-get install skopeo)")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./hack/images", "-out", out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./hack/images: %v\n%s", err, b)
	}
	manifests, err := release.ReadDir(filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range Specs(nil) {
		t.Run(spec.Name, func(t *testing.T) {
			ref := "oci:" + filepath.Join(out, spec.Name) + ":latest"
			var cfg struct {
				Architecture string `json:"architecture"`
				Config       struct {
					Entrypoint []string          `json:"Entrypoint"`
					Labels     map[string]string `json:"Labels"`
				} `json:"config"`
			}
			b, err := exec.Command(skopeo, "inspect", "--config", ref).Output()
			if err != nil {
				t.Fatalf("skopeo inspect --config %s: %v", ref, err)
			}
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			files := layerFiles(t, skopeo, ref)
			entry := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
			if f, ok := files[entry]; !ok || f.mode&0o111 == 0 || !bytes.HasPrefix(f.data, []byte("\x7fELF")) {
				t.Errorf("entrypoint %s is not an executable in the image", cfg.Config.Entrypoint)
			}
			for _, program := range spec.HostPrograms {
				checkHostProgram(t, files, program)
			}
			operator := spec.Name == "cluster-baremetal-operator"
			if (cfg.Config.Labels["io.openshift.release.operator"] == "true") != operator {
				t.Errorf("labels %v", cfg.Config.Labels)
			}
			if !operator {
				return
			}
			for name, data := range manifests {
				if f, ok := files["manifests/"+name]; !ok || !bytes.Equal(f.data, data) {
					t.Errorf("/manifests/%s is missing or differs from manifests/", name)
				}
			}
			n := 0
			for name := range files {
				if strings.HasPrefix(name, "manifests/") {
					n++
				}
			}
			if n != len(manifests) {
				t.Errorf("/manifests has %d files, manifests/ %d", n, len(manifests))
			}
		})
	}
}

type layerFile struct {
	data []byte
	mode int64
}

// layerFiles copies the image out with skopeo (dir: transport) and reads every layer's files.
func layerFiles(t *testing.T, skopeo, ref string) map[string]layerFile {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "image")
	if b, err := exec.Command(skopeo, "copy", ref, "dir:"+dir).CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy: %v\n%s", err, b)
	}
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	files := map[string]layerFile{}
	for _, l := range m.Layers {
		f, err := os.Open(filepath.Join(dir, strings.TrimPrefix(l.Digest, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				b, _ := io.ReadAll(tr)
				files[h.Name] = layerFile{data: b, mode: h.Mode}
			}
		}
		f.Close()
	}
	return files
}

// checkHostProgram: the image holds the program (an ELF executable on the image's PATH) with its
// loader and every shared library it and its libraries need, read from the ELF files themselves
// (PT_INTERP, DT_NEEDED), not from ldd as the builder does.
func checkHostProgram(t *testing.T, files map[string]layerFile, program string) {
	t.Helper()
	var path string
	for _, dir := range []string{"usr/local/bin", "usr/bin", "bin"} {
		if _, ok := files[dir+"/"+program]; ok {
			path = dir + "/" + program
			break
		}
	}
	if path == "" {
		t.Fatalf("%s is not on the image's PATH", program)
	}
	byBase := map[string]bool{}
	for name := range files {
		byBase[filepath.Base(name)] = true
	}
	seen := map[string]bool{}
	queue := []string{path}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		ef, err := elf.NewFile(bytes.NewReader(files[name].data))
		if err != nil {
			t.Fatalf("%s in the image is not an ELF file: %v", name, err)
		}
		for _, p := range ef.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			interp, _ := io.ReadAll(p.Open())
			loader := strings.TrimPrefix(strings.TrimRight(string(interp), "\x00"), "/")
			if _, ok := files[loader]; !ok {
				t.Errorf("%s needs the loader /%s, which the image lacks", name, loader)
			}
		}
		needed, err := ef.ImportedLibraries()
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range needed {
			if !byBase[lib] {
				t.Errorf("%s needs %s, which the image lacks", name, lib)
				continue
			}
			for other := range files {
				if filepath.Base(other) == lib {
					queue = append(queue, other)
				}
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("%s came without any shared library: %v", program, seen)
	}
}
