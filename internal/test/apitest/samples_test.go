package apitest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// TestSamplesApply creates every object of every file in config/samples in a fresh namespace
// (cluster-scoped ones as they are), rejecting unknown fields, and checks that together they
// cover every kind of the API.
func TestSamplesApply(t *testing.T) {
	ns := env.Namespace(t)
	kinds := map[string]bool{}
	for _, file := range sampleFiles(t) {
		for _, obj := range readObjects(t, file) {
			kinds[obj.GetKind()] = true
			createSample(t, ns, file, obj)
		}
	}
	for _, kind := range metal3Kinds() {
		if !kinds[kind] {
			t.Errorf("config/samples has no %s", kind)
		}
	}
}

func createSample(t *testing.T, ns, file string, obj *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	mapping, err := env.Client.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
	if err != nil {
		t.Fatalf("%s: %s: %v", file, obj.GetKind(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() != "" {
			t.Errorf("%s: %s %s names namespace %q; samples must be namespace-agnostic", file, obj.GetKind(), obj.GetName(), obj.GetNamespace())
		}
		obj.SetNamespace(ns)
	}
	sent := obj.DeepCopy()
	if err := env.Client.Create(ctx, obj, strict); err != nil {
		t.Errorf("%s: creating %s %s: %v", file, obj.GetKind(), obj.GetName(), err)
		return
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })

	// What the server stored must contain everything the sample says (defaults may be added).
	if spec, ok := sent.Object["spec"].(map[string]any); ok {
		requireSubset(t, file+": "+obj.GetKind()+" spec", spec, obj.Object["spec"])
	}
}

// requireSubset fails when a value of want is missing or different in got.
func requireSubset(t *testing.T, what string, want, got any) {
	t.Helper()
	if path, ok := subset(want, got, ""); !ok {
		t.Errorf("%s: the server changed or dropped %s", what, path)
	}
}

func subset(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := subset(v, g[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := subset(w[i], g[i], path+"[]"); !ok {
				return p, false
			}
		}
		return "", true
	default:
		// Numbers decode as int64 or float64 depending on the path they took.
		return path, normalize(want) == normalize(got)
	}
}

func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return v
}

// TestKustomizationsListEveryFile keeps config/crd and config/samples kustomizations in step with
// the files next to them (kustomize would silently leave a new CRD or sample out).
func TestKustomizationsListEveryFile(t *testing.T) {
	root := repoRoot(t)
	for dir, pattern := range map[string]string{
		"config/crd":     "bases/*.yaml",
		"config/samples": "*.yaml",
	} {
		files, err := filepath.Glob(filepath.Join(root, dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, f := range files {
			rel, _ := filepath.Rel(filepath.Join(root, dir), f)
			if rel != "kustomization.yaml" {
				want = append(want, rel)
			}
		}
		var k struct {
			Resources []string `json:"resources"`
		}
		data, err := os.ReadFile(filepath.Join(root, dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatalf("%s/kustomization.yaml: %v", dir, err)
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(k.Resources))
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s/kustomization.yaml lists %v, the directory has %v", dir, got, want)
		}
	}
	// One CRD per kind.
	crds, _ := filepath.Glob(filepath.Join(root, "config/crd/bases/metal3.io_*.yaml"))
	if len(crds) != len(metal3Kinds()) {
		t.Errorf("config/crd/bases has %d metal3.io CRDs, the API has %d kinds", len(crds), len(metal3Kinds()))
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func sampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	if len(files) == 0 {
		t.Fatal("no samples in config/samples")
	}
	return files
}

// readObjects decodes every document of a multi-document YAML file.
func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, filepath.Base(file), data)
}

func decodeObjects(t *testing.T, name string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // a document of comments only
		}
		// The unstructured JSON decoder gives integers as int64, as objects read from the
		// server have them, so sent and stored objects compare directly.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// metal3Kinds lists the kinds registered for metal3.io/v1alpha1 (without lists).
func metal3Kinds() []string {
	var kinds []string
	for kind := range env.Scheme.KnownTypes(metal3.GroupVersion) {
		if !strings.HasSuffix(kind, "List") && !slices.Contains([]string{"WatchEvent", "CreateOptions", "DeleteOptions", "GetOptions", "ListOptions", "PatchOptions", "UpdateOptions"}, kind) {
			kinds = append(kinds, kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
