//go:build tools

// Package tools pins kwok (sigs.k8s.io/kwok), which fakes the nodes of the special-resource-operator's
// end-to-end suite and benchmark. It has its own module so that its dependencies cannot move the
// versions kube-apiserver, kube-scheduler and kube-controller-manager are built with (../go.mod).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
