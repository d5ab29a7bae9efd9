package recipe

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// podTemplatePaths is where each kind keeps the pod spec its pods are made from.
var podTemplatePaths = map[string][]string{
	"DaemonSet":   {"spec", "template"},
	"Deployment":  {"spec", "template"},
	"StatefulSet": {"spec", "template"},
	"ReplicaSet":  {"spec", "template"},
	"Job":         {"spec", "template"},
}

// selectorKinds own their pods through spec.selector.matchLabels, which must then tell apart the
// pods of one kernel's copy from another's.
var selectorKinds = map[string]bool{"DaemonSet": true, "Deployment": true, "StatefulSet": true, "ReplicaSet": true}

// dnsLabelKinds need names without dots.
var dnsLabelKinds = map[string]bool{"Service": true, "Namespace": true}

// MakeAffine turns a rendered kernel-affine manifest into its copy for kernel k (the
// special-resource-operator's SetAffineAttributes, with the kubelet's kernel instead of NFD's
// label): the name gets the kernel as suffix; the object is labelled with the kernel; pods are
// pinned to nodes labelled with it, and workloads select only their own kernel's pods (an "app"
// label equal to the old name follows the new name).
func MakeAffine(u *unstructured.Unstructured, k string) {
	oldName := u.GetName()
	newName := naming.DNSName(oldName, k)
	if dnsLabelKinds[u.GetKind()] {
		newName = naming.DNSLabel(oldName, k)
	}
	value := naming.LabelValue(k)
	u.SetName(newName)
	setString(u.Object, value, "metadata", "labels", sro.KernelLabel)
	setString(u.Object, k, "metadata", "annotations", sro.KernelAnnotation)

	kind := u.GetKind()
	var podSpec []string
	switch {
	case kind == "Pod":
		podSpec = []string{"spec"}
	case podTemplatePaths[kind] != nil:
		tmpl := podTemplatePaths[kind]
		podSpec = append(append([]string{}, tmpl...), "spec")
		labels := append(append([]string{}, tmpl...), "metadata", "labels")
		setString(u.Object, value, append(labels, sro.KernelLabel)...)
		if selectorKinds[kind] {
			sel := []string{"spec", "selector", "matchLabels"}
			setString(u.Object, value, append(sel, sro.KernelLabel)...)
			renameApp(u.Object, oldName, newName, sel)
			renameApp(u.Object, oldName, newName, labels)
			// The object's own label too when the name is no label value (names go up to 253
			// characters): the API server refused the object while the selector had the copy's
			// shortened name. A name that fits stays, as the recipe wrote it.
			if len(validation.IsValidLabelValue(oldName)) > 0 {
				renameApp(u.Object, oldName, newName, []string{"metadata", "labels"})
			}
		}
	case kind == "BuildConfig" || kind == "Build":
		podSpec = []string{"spec"}
	}
	if podSpec != nil {
		setString(u.Object, value, append(podSpec, "nodeSelector", sro.KernelLabel)...)
	}
}

func renameApp(obj map[string]any, oldName, newName string, path []string) {
	if v, ok, _ := unstructured.NestedString(obj, append(path, "app")...); ok && v == oldName {
		setString(obj, newName, append(path, "app")...)
	}
}

// setString sets a nested string, creating the maps on the way.
func setString(obj map[string]any, value string, path ...string) {
	_ = unstructured.SetNestedField(obj, value, path...)
}
