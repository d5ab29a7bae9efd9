package specialresource

import (
	"strings"

	buildv1 "github.com/openshift/api/build/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

const viewOwner = "special-resource-operator"

// ownedKinds are the kinds the operator creates and reads through the cache: cached only when
// labelled specialresource.openshift.io/owned, so that it never caches every DaemonSet, pod or
// ConfigMap of the cluster. Objects of other kinds a recipe renders are read through the API
// reader (see get and list).
func ownedKinds(openShiftBuilds bool) []client.Object {
	kinds := []client.Object{&appsv1.DaemonSet{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &batchv1.Job{}, &corev1.Pod{},
		&corev1.ConfigMap{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
	if openShiftBuilds {
		kinds = append(kinds, &buildv1.Build{}, &buildv1.BuildConfig{})
	}
	return kinds
}

// cachedGVKs are the kinds read through the cache: the owned kinds, and the kinds cached whole
// (Nodes, compacted; SpecialResources; PreflightValidations; Namespaces).
var cachedGVKs = func() map[schema.GroupVersionKind]bool {
	m := map[schema.GroupVersionKind]bool{
		corev1.SchemeGroupVersion.WithKind("Node"): true, corev1.SchemeGroupVersion.WithKind("Namespace"): true,
		sro.GroupVersion.WithKind("SpecialResource"): true, sro.GroupVersion.WithKind("PreflightValidation"): true,
		buildv1.GroupVersion.WithKind("Build"): true, buildv1.GroupVersion.WithKind("BuildConfig"): true,
	}
	for _, gvk := range []schema.GroupVersionKind{
		appsv1.SchemeGroupVersion.WithKind("DaemonSet"), appsv1.SchemeGroupVersion.WithKind("Deployment"),
		appsv1.SchemeGroupVersion.WithKind("StatefulSet"), batchv1.SchemeGroupVersion.WithKind("Job"),
		corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		corev1.SchemeGroupVersion.WithKind("ServiceAccount"), rbacv1.SchemeGroupVersion.WithKind("Role"),
		rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
	} {
		m[gvk] = true
	}
	return m
}()

// CacheViews declare how the operator's controllers need the manager's cache: the owned kinds
// only when labelled as the operator's, Nodes compacted to what the controllers read. Pass
// openShiftBuilds when the cluster serves build.openshift.io (a view of a kind the cluster does
// not serve stops the manager).
func CacheViews(openShiftBuilds bool) []cacheview.View {
	owned, err := labels.NewRequirement(sro.OwnedLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	sel := labels.NewSelector().Add(*owned)
	views := []cacheview.View{{
		Object: &corev1.Node{}, Owner: viewOwner, Transform: compactNode,
		Reduced: "only name, labels and status.nodeInfo kernelVersion, osImage and bootID (read nodes through the API reader for the rest)",
	}}
	for _, obj := range ownedKinds(openShiftBuilds) {
		v := cacheview.View{Object: obj, Owner: viewOwner, Label: sel,
			Reduced: "only objects labelled " + sro.OwnedLabel + " (what the special-resource-operator created)"}
		if _, pod := obj.(*corev1.Pod); pod {
			v.Transform = compactPod
			v.Reduced += "; of a pod only its metadata, node, container names, phase and conditions (read pods through the API reader for the rest)"
		}
		views = append(views, v)
	}
	return views
}

// compactPod keeps what the operator reads of a pod it owns: its metadata (the hash and
// wait-for-logs annotations among them), the node it runs on, its containers' names (logs are
// read by container), its phase and conditions (Ready), and its reason and message (a recipe Pod
// that failed is reported with them). A driver pod's spec and container
// statuses are most of its size, and a driver DaemonSet has a pod on every selected node: at 1000
// nodes and 20 SpecialResources that is 5000 pods (100 MiB of cache whole).
func compactPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	containers := make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		containers[i] = corev1.Container{Name: c.Name}
	}
	meta := p.ObjectMeta
	meta.Annotations = nil
	for k, v := range p.Annotations {
		if prefix, _, _ := strings.Cut(sro.HashAnnotation, "/"); strings.HasPrefix(k, prefix+"/") { // the operator's own
			if meta.Annotations == nil {
				meta.Annotations = map[string]string{}
			}
			meta.Annotations[k] = v
		}
	}
	return &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: meta,
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, Containers: containers},
		Status:     corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions, Reason: p.Status.Reason, Message: p.Status.Message},
	}, nil
}

// compactNode keeps what the operator reads of a node: name, labels, and the kernel and OS it
// reports. A real node's status (images, conditions, addresses) is most of its size.
func compactNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Generation: n.Generation,
			Labels: n.Labels, CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: n.Status.NodeInfo.KernelVersion,
			OSImage: n.Status.NodeInfo.OSImage, BootID: n.Status.NodeInfo.BootID}},
	}, nil
}
