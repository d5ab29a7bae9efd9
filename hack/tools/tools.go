//go:build tools

// Package tools pins the test and code-generation tools the project builds from source:
// kube-apiserver (for envtest) and controller-gen. etcd lives in ./etcd because
// k8s.io/kubernetes requires a newer etcd client line than the server we run.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
