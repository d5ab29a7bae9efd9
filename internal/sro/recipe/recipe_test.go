package recipe

import (
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

func testSR() *sro.SpecialResource {
	return &sro.SpecialResource{
		ObjectMeta: metav1.ObjectMeta{Name: "simple-kmod"},
		Spec: sro.SpecialResourceSpec{
			NodeSelector: map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"},
			Version:      "1.2",
			DriverContainer: sro.SpecialResourceDriverContainer{
				Image:   "registry.example/simple-kmod:{{.KernelFullVersion}}",
				Modules: []string{"simple-kmod", "simple-procfs-kmod"},
				KernelMappings: []sro.KernelMapping{
					{Regexp: `^5\.14.{0,3}$`, Image: "registry.example/rt:{{.KernelPatchVersion}}"},
				},
				BuildArgs: []sro.BuildArg{{Name: "KVER", Value: "{{.KernelFullVersion}}"}},
				RunArgs:   []sro.RunArg{{Name: "KPATCH", Value: "{{.KernelPatchVersion}}-{{.SpecialResource.Spec.Version}}"}},
			},
		},
	}
}

func kernelValues(sr *sro.SpecialResource, k, patch string) Values {
	return Values{KernelFullVersion: k, KernelVersion: k, KernelPatchVersion: patch, Namespace: sr.TargetNamespace(),
		Image: "registry.example/simple-kmod:" + k, DriverHash: "h-" + k, SpecialResource: sr}
}

func TestBuiltin(t *testing.T) {
	if !slices.Contains(BuiltinNames(), sro.DriverContainerRecipe) {
		t.Fatalf("built-in recipes %v lack %s", BuiltinNames(), sro.DriverContainerRecipe)
	}
	r, err := Builtin(sro.DriverContainerRecipe)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range r.States {
		ids = append(ids, s.ID())
	}
	if !slices.Equal(ids, []string{"0000", "1000"}) {
		t.Fatalf("states %v, want 0000 and 1000", ids)
	}
	if _, err := Builtin("gpu-everything"); !errors.Is(err, ErrUnknownBuiltin) || !strings.Contains(err.Error(), "driver-container") {
		t.Fatalf("unknown recipe: %v; want ErrUnknownBuiltin listing the built-in ones", err)
	}
}

func TestFromConfigMap(t *testing.T) {
	tests := map[string]struct {
		data    map[string]string
		wantErr string
		states  []string
		def     bool
	}{
		"states sorted by key": {data: map[string]string{
			"1000-b.yaml": "kind: ConfigMap\napiVersion: v1\nmetadata: {name: b}\n",
			"0000-a.yaml": "kind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n",
		}, states: []string{"0000-a.yaml", "1000-b.yaml"}},
		"default SpecialResource": {data: map[string]string{
			"0000-a.yaml":          "{}",
			"specialresource.yaml": "apiVersion: sro.openshift.io/v1beta1\nkind: SpecialResource\nmetadata: {name: dep}\nspec: {namespace: dep-ns}\n",
		}, states: []string{"0000-a.yaml"}, def: true},
		"key not a state":        {data: map[string]string{"driver.yaml": "{}"}, wantErr: `key "driver.yaml" is not a state`},
		"bad template names key": {data: map[string]string{"0000-a.yaml": "{{ .Nope "}, wantErr: "0000-a.yaml"},
		"bad default":            {data: map[string]string{"0000-a.yaml": "{}", "specialresource.yaml": "spec: {nodeSelektor: {}}"}, wantErr: "specialresource.yaml"},
		"empty":                  {data: map[string]string{}, wantErr: "no states"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := FromConfigMap("configmap ns/r", tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "configmap ns/r") {
					t.Fatalf("error %v, want one naming the ConfigMap and containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range r.States {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.states) || (r.Default != nil) != tc.def {
				t.Fatalf("states %v default %v, want %v %v", names, r.Default != nil, tc.states, tc.def)
			}
			if tc.def && r.Default.Spec.Namespace != "dep-ns" {
				t.Fatalf("default SpecialResource %+v", r.Default.Spec)
			}
		})
	}
}

// TestFirstPass: template variables inside the SpecialResource's strings are rendered per kernel;
// kernel-mapping patterns are left alone; a bad variable names the field.
func TestFirstPass(t *testing.T) {
	sr := testSR()
	got, err := FirstPass(sr, kernelValues(sr, "5.14.0-284.el9.x86_64", "5.14.0-284"))
	if err != nil {
		t.Fatal(err)
	}
	dc := got.Spec.DriverContainer
	if dc.BuildArgs[0].Value != "5.14.0-284.el9.x86_64" || dc.RunArgs[0].Value != "5.14.0-284-1.2" {
		t.Fatalf("build/run args %+v %+v not rendered", dc.BuildArgs, dc.RunArgs)
	}
	if dc.Image != "registry.example/simple-kmod:5.14.0-284.el9.x86_64" || dc.KernelMappings[0].Image != "registry.example/rt:5.14.0-284" {
		t.Fatalf("images %q %q not rendered", dc.Image, dc.KernelMappings[0].Image)
	}
	if dc.KernelMappings[0].Regexp != `^5\.14.{0,3}$` {
		t.Fatalf("regexp changed to %q", dc.KernelMappings[0].Regexp)
	}
	if sr.Spec.DriverContainer.BuildArgs[0].Value != "{{.KernelFullVersion}}" {
		t.Fatal("FirstPass changed its input")
	}

	bad := testSR()
	bad.Spec.DriverContainer.BuildArgs = append(bad.Spec.DriverContainer.BuildArgs, sro.BuildArg{Name: "X", Value: "{{.KernelFullVerion}}"})
	_, err = FirstPass(bad, kernelValues(bad, "k", "k"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "spec.driverContainer.buildArgs[1].value" || !strings.Contains(err.Error(), "KernelFullVerion") {
		t.Fatalf("error %v, want a FieldError at spec.driverContainer.buildArgs[1].value", err)
	}
}

// TestRenderBuiltin: the driver-container recipe gives the namespace objects once and one
// DaemonSet per kernel, named after it, pinned to it, with its image, its rendered run
// arguments, and selecting only its own pods.
func TestRenderBuiltin(t *testing.T) {
	sr := testSR()
	r, err := Builtin(sro.DriverContainerRecipe)
	if err != nil {
		t.Fatal(err)
	}
	kernels := map[string]string{"5.14.0-284.30.1.el9_2.x86_64": "5.14.0-284", "5.14.0-362.8.1.el9_3.x86_64": "5.14.0-362"}
	per := map[string]Values{}
	for k, patch := range kernels {
		v := kernelValues(sr, k, patch)
		first, err := FirstPass(sr, v)
		if err != nil {
			t.Fatal(err)
		}
		v.SpecialResource = first
		per[k] = v
	}
	states, err := Render(r, Values{Namespace: "simple-kmod", SpecialResource: sr}, per)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 {
		t.Fatalf("%d states", len(states))
	}
	var kinds []string
	for _, o := range states[0].Objects {
		kinds = append(kinds, o.Obj.GetKind())
		if o.Kernel != "" || o.Wait {
			t.Errorf("%s %s: kernel %q wait %v; want neither", o.Obj.GetKind(), o.Obj.GetName(), o.Kernel, o.Wait)
		}
	}
	if !slices.Equal(kinds, []string{"ServiceAccount", "Role", "RoleBinding", "ConfigMap"}) {
		t.Fatalf("state 0000 kinds %v", kinds)
	}
	if len(states[1].Objects) != 2 {
		t.Fatalf("state 1000 has %d objects, want one DaemonSet per kernel", len(states[1].Objects))
	}
	names := map[string]bool{}
	for _, o := range states[1].Objects {
		ds := &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Obj.Object, ds); err != nil {
			t.Fatal(err)
		}
		k := o.Kernel
		names[ds.Name] = true
		if !o.Wait || ds.Annotations[sro.KernelAnnotation] != k {
			t.Errorf("%s: wait %v, kernel annotation %q", ds.Name, o.Wait, ds.Annotations[sro.KernelAnnotation])
		}
		if !strings.HasPrefix(ds.Name, "simple-kmod-5.14.0-") {
			t.Errorf("DaemonSet name %q does not start with the SpecialResource's name and the kernel", ds.Name)
		}
		pod := ds.Spec.Template
		if pod.Spec.NodeSelector[sro.KernelLabel] != k || pod.Spec.NodeSelector["feature.node.kubernetes.io/pci-10de.present"] != "true" {
			t.Errorf("%s: node selector %v, want the kernel and the SpecialResource's selector", ds.Name, pod.Spec.NodeSelector)
		}
		if ds.Spec.Selector.MatchLabels[sro.KernelLabel] != k || pod.Labels[sro.KernelLabel] != k || pod.Labels["app"] != ds.Name || ds.Spec.Selector.MatchLabels["app"] != ds.Name {
			t.Errorf("%s: selector %v, pod labels %v: want the kernel and app=<name> in both", ds.Name, ds.Spec.Selector.MatchLabels, pod.Labels)
		}
		c := pod.Spec.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if c.Image != "registry.example/simple-kmod:"+k || env["KERNEL_FULL_VERSION"] != k || env["KPATCH"] != kernels[k]+"-1.2" ||
			env["MODULES"] != "simple-kmod simple-procfs-kmod" || pod.Annotations["specialresource.openshift.io/driver-hash"] != "h-"+k {
			t.Errorf("%s: image %q env %v annotations %v", ds.Name, c.Image, env, pod.Annotations)
		}
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			t.Errorf("%s: driver container is not privileged", ds.Name)
		}
	}
	if len(names) != 2 {
		t.Fatalf("DaemonSet names %v are not distinct", names)
	}

	// No kernel: no DaemonSet, the namespace objects still.
	states, err = Render(r, Values{Namespace: "simple-kmod", SpecialResource: sr}, nil)
	if err != nil || len(states[0].Objects) != 4 || len(states[1].Objects) != 0 {
		t.Fatalf("without kernels: %v, %d and %d objects", err, len(states[0].Objects), len(states[1].Objects))
	}
}

func TestRenderErrors(t *testing.T) {
	tests := map[string]struct {
		data    map[string]string
		kernel  bool
		wantErr string
	}{
		"no name":  {data: map[string]string{"0000-a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n"}, wantErr: "manifest 1 (ConfigMap) has no metadata.name"},
		"bad yaml": {data: map[string]string{"0000-a.yaml": "apiVersion: v1\nkind: [\n"}, wantErr: "state 0000-a.yaml"},
		"missing variable names kernel": {data: map[string]string{"0000-a.yaml": "{{ if .KernelFullVersion }}{{ .Nope }}{{ end }}"}, kernel: true,
			wantErr: "state 0000-a.yaml (kernel 6.1.0)"},
		"bad log regexp": {data: map[string]string{"0000-a.yaml": "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\n  annotations:\n    specialresource.openshift.io/wait-for-logs: \"(\"\n"},
			wantErr: "wait-for-logs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := FromConfigMap("cm", tc.data)
			if err != nil {
				t.Fatal(err)
			}
			sr := testSR()
			var per map[string]Values
			if tc.kernel {
				per = map[string]Values{"6.1.0": kernelValues(sr, "6.1.0", "6.1.0")}
			}
			_, err = Render(r, Values{SpecialResource: sr}, per)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
