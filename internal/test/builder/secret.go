package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BMCSecret is a BMC credentials Secret with the "username" and "password" keys a host's
// spec.bmc.credentialsName points at. It carries no environment label: users create it without
// one, and labelling it is the operator's job.
func BMCSecret(namespace, name, username, password string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"username": []byte(username),
			"password": []byte(password),
		},
	}
}

// DataSecret is a user data, network data or metadata Secret holding value under key ("userData",
// "networkData", "metaData", or the fallback "value").
func DataSecret(namespace, name, key, value string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{key: []byte(value)},
	}
}
