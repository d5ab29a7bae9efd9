# Metalforge build, generate, test and benchmark entry points.
# Tools (kube-apiserver, etcd, controller-gen) are built from source into bin/ once; later
# runs reuse them because the targets depend only on the tool modules' go.mod files.

SHELL := /usr/bin/env bash
BIN := $(CURDIR)/bin
KUBE_VERSION := v1.37.2
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION)
export KUBEBUILDER_ASSETS := $(BIN)

.PHONY: all
all: build

##@ Tools

$(BIN)/kube-apiserver: hack/tools/go.mod
	cd hack/tools && go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/controller-gen: hack/tools/go.mod
	cd hack/tools && go build -trimpath -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/etcd: hack/tools/etcd/go.mod
	cd hack/tools/etcd && go build -trimpath -ldflags '-s -w' -o $@ go.etcd.io/etcd/server/v3

.PHONY: tools
tools: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/controller-gen ## Build the test and generation tools into bin/
