//go:build tools

// Package tools pins golangci-lint, which `make lint` builds into bin/. It has its own module so
// that its many dependencies cannot move the versions the API server and etcd are built with.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
