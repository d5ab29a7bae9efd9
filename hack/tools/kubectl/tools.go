//go:build tools

// Package tools pins kubectl, built from the same k8s.io/kubernetes release as kube-apiserver
// (../go.mod), for the manifests' `kubectl apply --validate=strict` test. It is a module of its own
// so that adding it did not change ../go.mod, whose date makes the Makefile rebuild kube-apiserver.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
