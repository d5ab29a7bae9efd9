//go:build tools

// Package etcd pins the etcd server envtest runs. It is a module of its own because
// k8s.io/kubernetes (in ../) requires the etcd v3.7 client line, which would lift the
// server to 3.7 by minimum version selection; the server we pin is the 3.6 line.
package etcd

import _ "go.etcd.io/etcd/server/v3"
