// Package release writes the cluster-baremetal-operator's release manifests (manifests/, the
// /manifests directory of its image): what the cluster version operator applies at run level 31
// (after the machine-api-operator's 30, which owns the openshift-machine-api namespace). Every
// object belongs to the baremetal capability. `make manifests` regenerates them (hack/manifests);
// a test fails when the checked-in copy is stale.
//
// The manifests are built from the code's own names (the render and clusteroperator packages) and
// from the generated CRDs and the baremetal-operator's RBAC under config/, so they cannot drift
// from what the operator and the stack use.
package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/metalforge/metalforge/internal/controller/provisioning"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// Namespace is the stack's namespace (the machine-api-operator's).
const Namespace = "openshift-machine-api"

// Prefix starts every manifest's file name: run level 31, this operator.
const Prefix = "0000_31_cluster-baremetal-operator_"

// ImagesConfigMap holds the images file the operator reads.
const ImagesConfigMap = "cluster-baremetal-operator-images"

// Images are the payload's images, by images.json key; the release tooling replaces them through
// image-references.
var Images = map[string]string{
	"clusterBaremetalOperator": "quay.io/metalforge/cluster-baremetal-operator:latest",
	"baremetalOperator":        "quay.io/metalforge/baremetal-operator:latest",
	"baremetalIronic":          "quay.io/metalforge/ironic:latest",
	"machineOSImages":          "quay.io/metalforge/machine-os-images:latest",
	// The image-customization-controller builds every host's agent image; the agent image is
	// what those images run (a reference only: this project does not build it).
	"imageCustomizationController": "quay.io/metalforge/image-customization-controller:latest",
	"baremetalIronicAgent":         "quay.io/metalforge/ironic-agent:latest",
}

// imageTags are image-references' tag names for the images.json keys.
var imageTags = map[string]string{
	"clusterBaremetalOperator": "cluster-baremetal-operator",
	"baremetalOperator":        "baremetal-operator",
	"baremetalIronic":          "ironic",
	"machineOSImages":          "machine-os-images",
	// OpenShift's tag names.
	"imageCustomizationController": "machine-image-customization-controller",
	"baremetalIronicAgent":         "ironic-agent",
}

// Inputs are the generated files the manifests include.
type Inputs struct {
	// CRDs are config/crd/bases, by file name.
	CRDs map[string][]byte
	// BMORole is config/rbac/role.yaml, the baremetal-operator's ClusterRole.
	BMORole []byte
}

// Manifests returns every file of the release manifests, by name.
func Manifests(in Inputs) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range slices.Sorted(maps.Keys(in.CRDs)) {
		if !strings.HasPrefix(name, "metal3.io_") {
			continue // other operators' CRDs (sro.openshift.io) ship with them
		}
		crd, err := annotate(in.CRDs[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// metal3.io_baremetalhosts.yaml → 0000_31_..._02_metal3.io_baremetalhosts.crd.yaml
		out[Prefix+"02_"+name[:len(name)-len(".yaml")]+".crd.yaml"] = crd
	}
	images, err := imagesConfigMap()
	if err != nil {
		return nil, err
	}
	rbac, err := rbacObjects(in.BMORole)
	if err != nil {
		return nil, err
	}
	for name, objs := range map[string][]any{
		"01_images.configmap.yaml":   {images},
		"03_webhookservice.yaml":     {webhookService()},
		"04_serviceaccount.yaml":     {serviceAccount()},
		"05_rbac.yaml":               rbac,
		"06_deployment.yaml":         {deployment()},
		"07_clusteroperator.cr.yaml": {clusterOperator()},
	} {
		data, err := documents(objs...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[Prefix+name] = data
	}
	out["image-references"], err = imageReferences()
	return out, err
}

func meta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: maps.Clone(clusteroperator.Annotations)}
}

// annotate adds the payload annotations to a YAML object.
func annotate(doc []byte) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	m, _ := obj["metadata"].(map[string]any)
	if m == nil {
		return nil, fmt.Errorf("no metadata")
	}
	ann, _ := m["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	for k, v := range clusteroperator.Annotations {
		ann[k] = v
	}
	m["annotations"] = ann
	return documents(obj)
}

// documents renders objects as one YAML stream.
func documents(objs ...any) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(clean(data))
	}
	return b.Bytes(), nil
}

// clean drops what a typed object marshals without meaning: null fields (creationTimestamp, a
// ClusterOperator's status.extension) and an empty top-level status. Empty maps elsewhere stay: a
// CRD's `subresources: {status: {}}` is one.
func clean(data []byte) []byte {
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return data
	}
	dropNulls(obj)
	if st, ok := obj["status"].(map[string]any); ok && len(st) == 0 {
		delete(obj, "status")
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return data
	}
	return out
}

func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if val == nil {
				delete(x, k)
				continue
			}
			dropNulls(val)
		}
	case []any:
		for _, val := range x {
			dropNulls(val)
		}
	}
}

func imagesConfigMap() (*corev1.ConfigMap, error) {
	data, err := json.MarshalIndent(Images, "", "  ")
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(ImagesConfigMap, Namespace),
		Data:       map[string]string{"images.json": string(data) + "\n"},
	}, nil
}

var operatorLabels = map[string]string{"k8s-app": "cluster-baremetal-operator"}

func webhookService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(render.CBOWebhookService, Namespace),
		Spec: corev1.ServiceSpec{
			Selector: operatorLabels,
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(render.CBOWebhookPort), Protocol: corev1.ProtocolTCP}},
		},
	}
}

func serviceAccount() *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(render.ServiceAccount, Namespace)}
}

// rbacObjects grant the operator's permissions and the baremetal-operator's to the service
// account every pod of the stack runs as, and the operator's read of the cluster's pull secret in
// the cluster's configuration namespace.
func rbacObjects(bmoRole []byte) ([]any, error) {
	var bmo rbacv1.ClusterRole
	if err := yaml.Unmarshal(bmoRole, &bmo); err != nil {
		return nil, fmt.Errorf("reading the baremetal-operator's role: %w", err)
	}
	name := clusteroperator.RBACName
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: render.ServiceAccount, Namespace: Namespace}}
	rbacMeta := metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1"}
	withKind := func(kind string) metav1.TypeMeta { m := rbacMeta; m.Kind = kind; return m }
	return []any{
		&rbacv1.ClusterRole{TypeMeta: withKind("ClusterRole"), ObjectMeta: meta(name, ""), Rules: append(provisioning.ClusterRules(), bmo.Rules...)},
		&rbacv1.ClusterRoleBinding{TypeMeta: withKind("ClusterRoleBinding"), ObjectMeta: meta(name, ""), Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}},
		&rbacv1.Role{TypeMeta: withKind("Role"), ObjectMeta: meta(name, Namespace), Rules: provisioning.NamespaceRules()},
		&rbacv1.RoleBinding{TypeMeta: withKind("RoleBinding"), ObjectMeta: meta(name, Namespace), Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}},
		&rbacv1.Role{TypeMeta: withKind("Role"), ObjectMeta: meta(name, secrets.ClusterPullSecretNamespace), Rules: provisioning.ConfigNamespaceRules()},
		&rbacv1.RoleBinding{TypeMeta: withKind("RoleBinding"), ObjectMeta: meta(name, secrets.ClusterPullSecretNamespace), Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}},
	}, nil
}

// Operator ports (cmd/cluster-baremetal-operator's flags).
const (
	metricsPort = 8080
	healthPort  = 9440
)

// imagesDir is where the images ConfigMap is mounted.
const imagesDir = "/etc/cluster-baremetal-operator/images"

func deployment() *appsv1.Deployment {
	one := int32(1)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(healthPort)}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}
	}
	no, yes := false, true
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta("cluster-baremetal-operator", Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: operatorLabels},
			// One operator at a time: the new one takes the lease when the old one is gone.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      operatorLabels,
					Annotations: map[string]string{"target.workload.openshift.io/management": `{"effect": "PreferredDuringScheduling"}`},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName: render.ServiceAccount,
					PriorityClassName:  "system-node-critical",
					NodeSelector:       map[string]string{render.ControlPlaneLabel: ""},
					Tolerations:        render.ControlPlaneTolerations(),
					SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name:    "cluster-baremetal-operator",
						Image:   Images["clusterBaremetalOperator"],
						Command: []string{"/usr/local/bin/cluster-baremetal-operator"},
						Args: []string{
							"--leader-elect",
							"--namespace=" + Namespace,
							"--images-json=" + imagesDir + "/images.json",
							"--webhook-port=" + strconv.Itoa(render.CBOWebhookPort),
							"--metrics-bind-address=:" + strconv.Itoa(metricsPort),
							"--health-probe-bind-address=:" + strconv.Itoa(healthPort),
						},
						Env: []corev1.EnvVar{{Name: "RELEASE_VERSION", Value: "0.0.1-snapshot"}},
						Ports: []corev1.ContainerPort{
							{Name: "webhook-server", ContainerPort: render.CBOWebhookPort, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
							{Name: "health", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: probe("/readyz"),
						LivenessProbe:  probe("/healthz"),
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "images", MountPath: imagesDir, ReadOnly: true}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("50Mi")}},
					}},
					Volumes: []corev1.Volume{{Name: "images", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: ImagesConfigMap}}}}},
				},
			},
		},
	}
	return d
}

// clusterOperator is the payload's copy: created by the cluster version operator before the
// operator runs, so that must-gather finds the related objects even when the operator crashes.
func clusterOperator() *configv1.ClusterOperator {
	co := clusteroperator.New()
	co.TypeMeta = metav1.TypeMeta{APIVersion: "config.openshift.io/v1", Kind: "ClusterOperator"}
	co.Status.Versions = []configv1.OperandVersion{{Name: clusteroperator.OperatorVersionName, Version: "0.0.1-snapshot"}}
	co.Status.RelatedObjects = clusteroperator.RelatedObjects(Namespace)
	return co
}

// imageReferences is the ImageStream that names the payload's images for the release tooling.
func imageReferences() ([]byte, error) {
	type tag struct {
		Name string         `json:"name"`
		From map[string]any `json:"from"`
	}
	var tags []tag
	for _, key := range slices.Sorted(maps.Keys(imageTags)) {
		tags = append(tags, tag{Name: imageTags[key], From: map[string]any{"kind": "DockerImage", "name": Images[key]}})
	}
	return documents(map[string]any{
		"kind": "ImageStream", "apiVersion": "image.openshift.io/v1",
		"spec": map[string]any{"tags": tags},
	})
}

// ReadInputs reads the generated inputs under root (the repository).
func ReadInputs(root string) (Inputs, error) {
	in := Inputs{CRDs: map[string][]byte{}}
	dir := filepath.Join(root, "config", "crd", "bases")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return in, err
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return in, err
		}
		in.CRDs[e.Name()] = data
	}
	in.BMORole, err = os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	return in, err
}

// ReadDir reads a manifests directory (name → content).
func ReadDir(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = data
	}
	return out, nil
}
