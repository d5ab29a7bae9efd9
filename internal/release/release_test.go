package release

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

func repo(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestManifestsUpToDate: manifests/ is what `make manifests` writes from the code and config/.
func TestManifestsUpToDate(t *testing.T) {
	root := repo(t)
	in, err := ReadInputs(root)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Manifests(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadDir(filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("manifests/%s is stale: run `make manifests`", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("manifests/%s is not generated any more: run `make manifests`", name)
		}
	}
}

// objects splits a YAML stream.
func objects(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			break
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// TestManifestsForThePayload: run level 31 file names, and every object in the baremetal
// capability (a Role and binding in the stack's namespace and one in the cluster's configuration
// namespace); the ClusterOperator names its related objects; the operator's Deployment runs as the
// service account the RBAC grants, with the images file mounted where it reads it.
func TestManifestsForThePayload(t *testing.T) {
	files, err := ReadDir(filepath.Join(repo(t), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for name, data := range files {
		if name == "image-references" {
			continue
		}
		if !strings.HasPrefix(name, Prefix) {
			t.Errorf("%s: not a run level 31 name (%s...)", name, Prefix)
		}
		for _, o := range objects(t, data) {
			kinds[o["kind"].(string)]++
			ann, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any)
			if ann["capability.openshift.io/name"] != "baremetal" {
				t.Errorf("%s: %s has no baremetal capability annotation", name, o["kind"])
			}
		}
	}
	for kind, n := range map[string]int{"CustomResourceDefinition": 10, "Deployment": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 2, "RoleBinding": 2, "Service": 1, "ConfigMap": 1, "ClusterOperator": 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s, want %d", kinds[kind], kind, n)
		}
	}
	refs := string(files["image-references"])
	for _, img := range Images {
		if !strings.Contains(refs, img) {
			t.Errorf("image-references lacks %s", img)
		}
	}
}

// TestKubectlApplyStrict: the manifests apply to a fresh API server with kubectl's strict
// validation (an unknown or duplicated field fails), in file-name order as the cluster version
// operator applies them, once the machine-api-operator's namespace, the cluster's configuration
// namespace (openshift-config, which OpenShift creates long before run level 31) and OpenShift's
// own CRDs exist; a second apply changes nothing.
func TestKubectlApplyStrict(t *testing.T) {
	kubectl, err := testenv.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	crds, err := testenv.OpenShiftCRDs("0000_00_cluster-version-operator_01_clusteroperators.crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{NoProjectCRDs: true, CRDPaths: crds})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	for _, ns := range []string{Namespace, secrets.ClusterPullSecretNamespace} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(repo(t), "manifests")
	files, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if n != "image-references" && !yield(n) {
				return
			}
		}
	})
	apply := func() string {
		var out bytes.Buffer
		for _, n := range names {
			cmd := exec.Command(kubectl, "--kubeconfig", env.KubeconfigPath, "apply", "--validate=strict", "-f", filepath.Join(dir, n))
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("kubectl apply --validate=strict -f %s: %v\n%s", n, err, out.String())
			}
		}
		return out.String()
	}
	first := apply()
	if strings.Contains(strings.ToLower(first), "warning") {
		t.Errorf("kubectl warned:\n%s", first)
	}
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "cluster-baremetal-operator"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.ServiceAccountName != render.ServiceAccount {
		t.Errorf("the operator runs as %q", d.Spec.Template.Spec.ServiceAccountName)
	}
	second := apply()
	lines := strings.Split(strings.TrimSpace(second), "\n")
	for _, line := range lines {
		// kubectl cannot write a ClusterOperator's status through the main resource (the cluster
		// version operator creates it with its status), so the status in its manifest always looks
		// new to kubectl; nothing is written.
		if !strings.HasSuffix(line, " unchanged") && line != "clusteroperator.config.openshift.io/"+clusteroperator.Name+" configured" {
			t.Errorf("second apply changed something: %s", line)
		}
	}
	objs := 0
	for _, n := range names {
		objs += len(objects(t, files[n]))
	}
	if len(lines) != objs {
		t.Errorf("second apply reported %d objects of %d:\n%s", len(lines), objs, second)
	}
}

// TestCRDsAreConfigs: each CRD manifest is config/crd/bases' CRD, with only the payload's
// annotations added (nothing dropped on the way, such as a status subresource).
func TestCRDsAreConfigs(t *testing.T) {
	root := repo(t)
	in, err := ReadInputs(root)
	if err != nil {
		t.Fatal(err)
	}
	files, err := ReadDir(filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range in.CRDs {
		if !strings.HasPrefix(name, "metal3.io_") {
			continue
		}
		got := objects(t, files[Prefix+"02_"+strings.TrimSuffix(name, ".yaml")+".crd.yaml"])
		want := objects(t, data)
		if len(got) != 1 || len(want) != 1 {
			t.Fatalf("%s: %d and %d objects", name, len(got), len(want))
		}
		ann := got[0]["metadata"].(map[string]any)["annotations"].(map[string]any)
		for k := range clusteroperator.Annotations {
			delete(ann, k)
		}
		if !reflect.DeepEqual(got[0], want[0]) {
			t.Errorf("%s: the manifest differs from config/crd/bases beyond its annotations", name)
		}
	}
}

// TestRoleGrantsThePrivilegedSCC: the account every pod of the stack runs as may use the
// privileged SCC in the stack's namespace, without which OpenShift refuses the metal3 pod (host
// network, host paths, root) and the image-customization-controller (root, a host path).
func TestRoleGrantsThePrivilegedSCC(t *testing.T) {
	files, err := ReadDir(filepath.Join(repo(t), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	role := boundRole(t, files, Namespace)
	granted := false
	for _, r := range role["rules"].([]any) {
		rule := r.(map[string]any)
		if reflect.DeepEqual(rule["apiGroups"], []any{"security.openshift.io"}) && reflect.DeepEqual(rule["resources"], []any{"securitycontextconstraints"}) &&
			reflect.DeepEqual(rule["resourceNames"], []any{"privileged"}) && reflect.DeepEqual(rule["verbs"], []any{"use"}) {
			granted = true
		}
	}
	if !granted {
		t.Errorf("the Role does not grant use of the privileged SCC: %v", role["rules"])
	}
}

// TestRoleReadsOnlyTheClusterPullSecret: in the cluster's configuration namespace the operator may
// read the cluster's pull secret, by name, and nothing else (the namespace holds other secrets of
// the cluster's): it caches that one Secret with a metadata.name field selector, which the API
// server authorizes by name for list and watch too.
func TestRoleReadsOnlyTheClusterPullSecret(t *testing.T) {
	files, err := ReadDir(filepath.Join(repo(t), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	role := boundRole(t, files, secrets.ClusterPullSecretNamespace)
	want := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"},
		"resourceNames": []any{secrets.ClusterPullSecretName}, "verbs": []any{"get", "list", "watch"}}}
	if !reflect.DeepEqual(role["rules"], want) {
		t.Errorf("the Role in %s grants %v, want %v", secrets.ClusterPullSecretNamespace, role["rules"], want)
	}
}

// boundRole is the operator's Role in namespace of the RBAC manifest; it fails the test unless a
// RoleBinding there binds it to the stack's service account.
func boundRole(t *testing.T, files map[string][]byte, namespace string) map[string]any {
	t.Helper()
	var role, binding map[string]any
	for _, o := range objects(t, files[Prefix+"05_rbac.yaml"]) {
		if o["metadata"].(map[string]any)["namespace"] != namespace {
			continue
		}
		switch o["kind"] {
		case "Role":
			role = o
		case "RoleBinding":
			binding = o
		}
	}
	if role == nil || binding == nil {
		t.Fatalf("no Role and RoleBinding in %s", namespace)
	}
	subjects, _ := binding["subjects"].([]any)
	ref, _ := binding["roleRef"].(map[string]any)
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != render.ServiceAccount ||
		subjects[0].(map[string]any)["namespace"] != Namespace || ref["name"] != role["metadata"].(map[string]any)["name"] {
		t.Errorf("the Role in %s is bound to %v (%v), want the stack's service account %s/%s", namespace, subjects, ref, Namespace, render.ServiceAccount)
	}
	return role
}
