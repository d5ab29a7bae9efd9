package validation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

func valid() *sro.SpecialResource {
	return &sro.SpecialResource{
		ObjectMeta: metav1.ObjectMeta{Name: "simple-kmod"},
		Spec: sro.SpecialResourceSpec{
			NodeSelector: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"},
			DriverContainer: sro.SpecialResourceDriverContainer{
				Image:     "registry.example/simple-kmod:{{.KernelFullVersion}}",
				Modules:   []string{"simple-kmod"},
				BuildArgs: []sro.BuildArg{{Name: "KVER", Value: "{{.KernelFullVersion}}"}},
				Source:    sro.DriverContainerSource{Git: &sro.GitSource{URI: "https://github.com/acme/kmod.git"}},
			},
		},
	}
}

// TestSpec lists every message the webhook and the controller give; each names its field.
func TestSpec(t *testing.T) {
	tests := map[string]struct {
		mutate func(*sro.SpecialResource)
		field  string
		msg    string
	}{
		"valid": {mutate: func(*sro.SpecialResource) {}},
		"bad namespace": {mutate: func(sr *sro.SpecialResource) { sr.Spec.Namespace = "Bad_NS" },
			field: "spec.namespace", msg: "RFC 1123"},
		"dotted name without a namespace (the name would be the namespace)": {mutate: func(sr *sro.SpecialResource) { sr.Name = "gpu.v2" },
			field: "spec.namespace", msg: `empty, so the namespace would be the SpecialResource's name "gpu.v2"`},
		"dotted name with a namespace": {mutate: func(sr *sro.SpecialResource) { sr.Name, sr.Spec.Namespace = "gpu.v2", "drivers" }},
		"bad node selector": {mutate: func(sr *sro.SpecialResource) { sr.Spec.NodeSelector = map[string]string{"a b": "x"} },
			field: "spec.nodeSelector", msg: "name part must consist"},
		"unknown recipe": {mutate: func(sr *sro.SpecialResource) { sr.Spec.Recipe.Name = "gpu" },
			field: "spec.recipe.name", msg: `supported values: "driver-container"`},
		"recipe both": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.Recipe = sro.SpecialResourceRecipe{Name: "driver-container", ConfigMap: &sro.RecipeConfigMap{Name: "r", Namespace: "n"}}
		}, field: "spec.recipe", msg: "set one of name and configMap"},
		"recipe configmap namespace": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "r", Namespace: "N!"}}
		}, field: "spec.recipe.configMap.namespace", msg: "RFC 1123"},
		"bad image template": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Image = "r/x:{{.KernelFullVersion" },
			field: "spec.driverContainer.image", msg: "bad template"},
		"unknown template variable": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.BuildArgs[0].Value = "{{.KernelVersio}}" },
			field: "spec.driverContainer.buildArgs[0].value", msg: "can't evaluate field KernelVersio"},
		"image without tag": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Image = "registry.example/simple-kmod" },
			field: "spec.driverContainer.image", msg: "not an image with a tag or digest"},
		"mapping image": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DriverContainer.KernelMappings = []sro.KernelMapping{{Literal: "k", Image: "UPPER/x:{{.KernelFullVersion}}"}}
		}, field: "spec.driverContainer.kernelMappings[0].image", msg: "not an image with a tag or digest"},
		"mapping both": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DriverContainer.KernelMappings = []sro.KernelMapping{{Literal: "k", Regexp: "k", Image: "r/x:1"}}
		}, field: "spec.driverContainer.kernelMappings[0]", msg: "exactly one of literal and regexp"},
		"mapping regexp": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DriverContainer.KernelMappings = []sro.KernelMapping{{Regexp: "5.14(", Image: "r/x:1"}}
		}, field: "spec.driverContainer.kernelMappings[0].regexp", msg: "missing closing )"},
		"no image": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Image = "" },
			field: "spec.driverContainer.image", msg: "needs an image template"},
		"no module": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Modules = nil },
			field: "spec.driverContainer.modules", msg: "name at least one"},
		"module with shell": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Modules = []string{"x; rm -rf /"} },
			field: "spec.driverContainer.modules[0]", msg: "only letters, digits"},
		"pull secret": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.PullSecret = "Pull Secret" },
			field: "spec.driverContainer.pullSecret", msg: "RFC 1123"},
		"git uri": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Source.Git.URI = "not a url" },
			field: "spec.driverContainer.source.git.uri", msg: "want a URL"},
		"git uri with a token and no scheme: not repeated": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DriverContainer.Source.Git.URI = "oauth2:glpat-S3CRET@gitlab.example/x.git"
		}, field: "spec.driverContainer.source.git.uri", msg: `"(not shown: it may hold credentials)": want a URL`},
		"build arg name": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.BuildArgs[0].Name = "A=B" },
			field: "spec.driverContainer.buildArgs[0].name", msg: "no '='"},
		"duplicate build arg": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DriverContainer.BuildArgs = append(sr.Spec.DriverContainer.BuildArgs, sro.BuildArg{Name: "KVER"})
		}, field: "spec.driverContainer.buildArgs[1].name", msg: "Duplicate value"},
		"run arg name": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.RunArgs = []sro.RunArg{{Name: "1X"}} },
			field: "spec.driverContainer.runArgs[0].name", msg: "environment variable name"},
		"host path": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DriverContainer.Artifacts.HostPaths = []sro.HostPathArtifact{{SourcePath: "run/x", DestinationDir: "/d"}}
		}, field: "spec.driverContainer.artifacts.hostPaths[0].sourcePath", msg: "absolute"},
		"self dependency": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "simple-kmod"}}
		},
			field: "spec.dependsOn[0].name", msg: "dependency cycle: simple-kmod → simple-kmod"},
		"duplicate dependency": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "a"}, {Name: "a"}}
		}, field: "spec.dependsOn[1].name", msg: "Duplicate value"},
		"dependency recipe": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "a", Recipe: &sro.SpecialResourceRecipe{Name: "nope"}}}
		}, field: "spec.dependsOn[0].recipe.name", msg: "supported values"},
		// The recipe is checked only when the dependency is missing (DependencyRecipe): one the
		// user created makes it unused, and a SpecialResource valid before stays valid.
		"dependency recipe driver-container: checked when missing, not here": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "a", Recipe: &sro.SpecialResourceRecipe{Name: sro.DriverContainerRecipe}}}
		}},
		"dependency recipe ConfigMap: fine": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: "a", Recipe: &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "r", Namespace: "n"}}}}
		}},
		"configuration template": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.Configuration = []sro.SpecialResourceConfiguration{{Name: "c", Value: []string{"ok", "{{ .Nope }}"}}}
		}, field: "spec.configuration[0].value[1]", msg: "can't evaluate field Nope"},
		"configmap recipe needs no image": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "r", Namespace: "n"}}
			sr.Spec.DriverContainer.Image, sr.Spec.DriverContainer.Modules = "", nil
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sr := valid()
			tc.mutate(sr)
			errs := Spec(sr)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("valid spec refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got %d errors %v, want one at %s", len(errs), errs, tc.field)
			}
			if errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.msg) {
				t.Fatalf("error %q at %s, want %q at %s", errs[0].Error(), errs[0].Field, tc.msg, tc.field)
			}
		})
	}
}

func TestCycle(t *testing.T) {
	mk := func(name string, deps ...string) *sro.SpecialResource {
		sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, d := range deps {
			sr.Spec.DependsOn = append(sr.Spec.DependsOn, sro.SpecialResourceDependency{Name: d})
		}
		return sr
	}
	stored := map[string]*sro.SpecialResource{
		"b": mk("b", "c"),
		"c": mk("c", "a"),
		"d": mk("d"),
		"e": mk("e", "e"),
		// The stored copy of a says something else: the one given must win.
		"a": mk("a"),
	}
	lookup := func(n string) (*sro.SpecialResource, bool) { sr, ok := stored[n]; return sr, ok }
	tests := map[string]struct {
		sr   *sro.SpecialResource
		want string
		at   string
	}{
		"a → b → c → a":           {sr: mk("a", "d", "b"), want: "dependency cycle: a → b → c → a", at: "spec.dependsOn[1].name"},
		"no cycle":                {sr: mk("x", "d", "missing")},
		"cycle elsewhere ignored": {sr: mk("x", "e")},
		"self left to Spec":       {sr: mk("a", "a")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Cycle(tc.sr, lookup)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if err == nil || err.Field != tc.at || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q at %s", err, tc.want, tc.at)
			}
		})
	}
}

// TestSampleIsValid: the sample in config/samples passes the webhook's checks.
func TestSampleIsValid(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "sro_v1beta1_specialresource.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sr := &sro.SpecialResource{}
	if err := yaml.UnmarshalStrict(data, sr); err != nil {
		t.Fatal(err)
	}
	if errs := Spec(sr); len(errs) > 0 {
		t.Fatalf("sample refused: %v", errs)
	}
}

// A missing dependency is created with nothing but its recipe: the built-in recipe, which needs an
// image and modules, would be refused by the webhook on every retry.
func TestDependencyRecipe(t *testing.T) {
	path := field.NewPath("spec", "dependsOn").Index(1).Child("recipe")
	for name, tc := range map[string]struct {
		recipe *sro.SpecialResourceRecipe
		msg    string
	}{
		"driver-container": {recipe: &sro.SpecialResourceRecipe{Name: sro.DriverContainerRecipe},
			msg: `spec.dependsOn[1].recipe: Invalid value: "driver-container": a dependency is created with nothing but its recipe, and the built-in recipe driver-container needs spec.driverContainer.image, spec.driverContainer.modules: create SpecialResource a yourself, or give this dependency a recipe ConfigMap`},
		"empty (the default, driver-container)": {recipe: &sro.SpecialResourceRecipe{},
			msg: "the built-in recipe driver-container (the default) needs spec.driverContainer.image"},
		"a recipe ConfigMap": {recipe: &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "r", Namespace: "n"}}},
	} {
		t.Run(name, func(t *testing.T) {
			errs := DependencyRecipe(sro.SpecialResourceDependency{Name: "a", Recipe: tc.recipe}, path)
			switch {
			case tc.msg == "" && len(errs) > 0:
				t.Fatalf("refused: %v", errs)
			case tc.msg != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.msg)):
				t.Fatalf("errors %v, want one with %q", errs, tc.msg)
			}
		})
	}
}
