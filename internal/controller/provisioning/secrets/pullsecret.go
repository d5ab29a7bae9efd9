package secrets

import (
	"bytes"
	"encoding/base64"
)

// The cluster's pull secret and the operator's copy of it (OpenShift's names). The
// image-customization-controller writes the copy into every host's image, so that podman on the
// host can pull the agent image from a registry that asks for credentials.
const (
	// ClusterPullSecretNamespace and ClusterPullSecretName name the cluster's pull secret, which
	// the installer writes and the administrator rotates.
	ClusterPullSecretNamespace = "openshift-config"
	ClusterPullSecretName      = "pull-secret"
	// PullSecret is the copy in the operator's namespace: a pod mounts only Secrets of its own
	// namespace.
	PullSecret = "pull-secret"
	// KeyDockerConfigJSON is a pull secret's key (corev1.DockerConfigJsonKey).
	KeyDockerConfigJSON = ".dockerconfigjson"
)

// PullSecretData is the copy's data for the cluster's pull secret data: its auth file as base64
// text under the same key, as OpenShift's operator writes it (its PR #184), so that a copy it left
// is already current and a take-over rewrites nothing. The controller reads base64 or JSON alike.
// The copy is an Opaque Secret: base64 text is no valid kubernetes.io/dockerconfigjson value. Nil
// when the cluster's has no auth file: there is no copy, and the controller runs without one (a
// registry that needs no credentials).
func PullSecretData(cluster map[string][]byte) map[string][]byte {
	auth := cluster[KeyDockerConfigJSON]
	if len(bytes.TrimSpace(auth)) == 0 {
		return nil
	}
	return map[string][]byte{KeyDockerConfigJSON: []byte(base64.StdEncoding.EncodeToString(auth))}
}

// PullSecretFingerprint digests the copy's data for the image-customization-controller's pod
// template: the controller reads the file only at start (and a subPath mount never sees a new
// version), so a rotated pull secret must restart it. The digest is of the whole auth file, whose
// registry tokens are long random strings, never of one password alone.
func PullSecretFingerprint(data map[string][]byte) string {
	return Fingerprint(data[KeyDockerConfigJSON])
}
