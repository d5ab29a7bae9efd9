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

# golangci-lint has its own tools module so its dependencies cannot move the API server's.
$(BIN)/golangci-lint: hack/tools/golangci/go.mod
	cd hack/tools/golangci && go build -trimpath -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# The special-resource-operator's end-to-end suite and benchmark run a scheduler, a controller
# manager (DaemonSets, garbage collection) and kwok's fake nodes against the same API server.
$(BIN)/kube-controller-manager: hack/tools/go.mod
	cd hack/tools && go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-controller-manager

$(BIN)/kube-scheduler: hack/tools/go.mod
	cd hack/tools && go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-scheduler

# kwok has its own module (hack/tools/kwok) so that its dependencies cannot move the API server's.
$(BIN)/kwok: hack/tools/kwok/go.mod
	cd hack/tools/kwok && go build -trimpath -ldflags '-s -w' -o $@ sigs.k8s.io/kwok/cmd/kwok

# kubectl from the same Kubernetes release, in a module of its own (hack/tools/kubectl) so that
# adding it left hack/tools/go.mod, and so the kube-apiserver build, alone. ~20 s once
# kube-apiserver's packages are in the build cache.
$(BIN)/kubectl: hack/tools/kubectl/go.mod
	cd hack/tools/kubectl && go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kubectl

.PHONY: tools
tools: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/controller-gen $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kwok $(BIN)/kubectl ## Build the test and generation tools into bin/

##@ Development

CONTROLLER_GEN := $(BIN)/controller-gen

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code, CRDs, RBAC and webhook manifests from the markers under ./...
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role webhook paths=./... \
		output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook

.PHONY: manifests
manifests: ## Write the cluster-baremetal-operator's release manifests (manifests/) from the code and config/ (a test fails when they are stale)
	go run ./hack/manifests

IMAGES_DIR ?= _output/images

.PHONY: images
images: host-packages ## Build the container images as OCI layouts in IMAGES_DIR (_output/images), offline (no Docker engine; the ICC image takes this machine's nmcli)
	go run ./hack/images -out $(IMAGES_DIR)

.PHONY: build
build: ## Build every package and binary
	go build ./...

.PHONY: lint
lint: $(BIN)/golangci-lint ## golangci-lint (.golangci.yml: gofmt, go vet, staticcheck, depguard layering, errorlint, thelper, ...)
	$(BIN)/golangci-lint run ./...

.PHONY: docs
docs: ## Generate docs/host-state-machine.md from the host state machine's table (a test fails when it is stale)
	go run ./hack/statemachine-docs docs/host-state-machine.md

##@ Demo

DEMO_ONCE ?=

# The Ironic root (mostly download and disk), kube-apiserver + etcd and the Go binaries (CPU) are
# built at once; on a fresh clone the kube-apiserver build or the Ironic install is the long part.
.PHONY: demo
demo: ## Run the API server, Ironic, bmcsim (8 servers) and the operator; provision 8 hosts, show them; Ctrl-C stops all (DEMO_ONCE=1: exit when provisioned; DEMO_IMAGES=1: per-host agent images with static addresses)
	@$(MAKE) --no-print-directory -j4 demo-prereqs
	@$(BIN)/demo $(if $(DEMO_ONCE),-once) $(if $(DEMO_IMAGES),-images)

.PHONY: demo-prereqs
demo-prereqs: $(BIN)/kube-apiserver $(BIN)/etcd ironic-root binaries $(if $(DEMO_IMAGES),host-packages)

# bin/baremetal-operator, bin/image-customization-controller and bin/bmcsim, which the demo,
# test/e2e and the benchmarks run as processes, and the demo itself.
.PHONY: binaries
binaries:
	go build -o $(BIN)/baremetal-operator ./cmd/baremetal-operator
	go build -o $(BIN)/image-customization-controller ./cmd/image-customization-controller
	go build -o $(BIN)/bmcsim ./cmd/bmcsim
	go build -o $(BIN)/demo ./hack/demo

##@ Host benchmark

N ?= 1000

# Builds bin/baremetal-operator, starts kube-apiserver + etcd from bin/, runs the operator as a
# subprocess with the fixture provisioner at zero latency and creates N hosts at once.
.PHONY: bench-hosts
bench-hosts: tools ## Provision N (1000) hosts at once with the fixture provisioner; print time, API writes, Events, RSS, CPU
	go run ./test/bench/hosts -n $(N)

##@ Ironic

.PHONY: ironic-up
ironic-up: ## Prepare (once) and start Ironic from Debian sid on loopback; prints NAME=value lines: export $$(make -s ironic-up)
	@hack/ironic-up.sh

.PHONY: ironic-down
ironic-down: ## Stop the Ironic started by ironic-up
	@hack/ironic-down.sh

# The first build of the root downloads ~100 MB from Debian (2-7 min): done before `go test`, whose
# per-package timeout it would eat. Not root, or no mirror (exit 3): the Ironic tests skip.
.PHONY: ironic-root
ironic-root: ## Build the Ironic root once (debootstrap + apt) without starting Ironic
	@if [ "$$(id -u)" != 0 ]; then echo "ironic-root: not root, tests that need Ironic will skip"; exit 0; fi; \
	hack/ironic-up.sh --prepare-only || [ $$? = 3 ]

##@ Test

.PHONY: host-packages
host-packages: ## Install the Debian programs tests run when missing (xorriso, genisoimage, isoinfo, cpio, nmcli, skopeo, ip; needs root)
	@hack/host-packages.sh

.PHONY: test
# -count=1: envtest suites read CRDs and samples that go's test cache does not reliably track, so a
# cached pass could hide a regenerated CRD that no longer works. -timeout 30m: test/ironic drives
# real Ironic through every provisioning phase (~3 min alone, much longer on 2 busy cores), and
# test/e2e (which builds bin/baremetal-operator itself) runs the operator on Ironic with 18 hosts
# (~9 min alone).
# On failure the failing tests' messages are printed again at the end (hack/test-failures.sh).
test: tools generate ironic-root host-packages lint ## Lint, then run every Go test (envtest suites use the kube-apiserver and etcd in bin/)
	@set -o pipefail; mkdir -p .cache; log=.cache/test.log; \
	echo "go test -count=1 -timeout 30m ./...  (output also in $$log)"; \
	go test -count=1 -timeout 30m ./... 2>&1 | tee "$$log" || { hack/test-failures.sh "$$log"; exit 1; }
	@hack/fuzz.sh $(TEST_FUZZTIME) $(FUZZ_TARGETS)

FUZZTIME ?= 60s
# The fuzz targets: package and function, in pairs.
FUZZ_TARGETS := ./internal/bmc/ FuzzParse ./internal/controller/host/ FuzzHostAdmissionAndReconcile

.PHONY: fuzz
fuzz: ## Fuzz the BMC address parser and the host admission + reconcile path, FUZZTIME (60s) each
	@hack/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

# make test fuzzes each target for a short, bounded time after the tests (go test alone runs only
# their seed corpora).
TEST_FUZZTIME ?= 20s

##@ Ironic benchmark

# N hosts through the whole lifecycle on real Ironic and bmcsim, first driven directly through
# Ironic's API (the baseline), then by the operator; N defaults to 1000 above, so give it: N=100.
.PHONY: bench-ironic
bench-ironic: tools ironic-root ## N hosts through register → inspect → provision → deprovision → delete on real Ironic: operator vs. Ironic alone
	go run ./test/bench/ironic -n $(N) $(BENCH_IRONIC_ARGS)

# N is 50 unless given (the 1000 above is bench-hosts').
.PHONY: bench-servicing
bench-servicing: tools ironic-root ## N (50) provisioned hosts through a BIOS-setting live update on real Ironic: operator vs. a script on Ironic alone
	go run ./test/bench/servicing -n $(if $(filter command line environment,$(origin N)),$(N),50)

##@ Image benchmark

# Builds bin/image-customization-controller, writes a CoreOS-layout base ISO of about 1 GiB into
# .cache/bench-images once, starts kube-apiserver + etcd from bin/ and runs the controller as a
# subprocess. N is 100 unless given (the 1000 above is bench-hosts').
.PHONY: bench-images
bench-images: tools host-packages ## N (100) PreprovisioningImages built at once; 1/8/32 concurrent full downloads of a 1 GiB ISO against cat; controller RSS
	go run ./test/bench/images -n $(if $(filter command line environment,$(origin N)),$(N),100) $(BENCH_IMAGES_ARGS)

##@ Special resource operator

# Both start kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok from bin/ and
# run bin/special-resource-operator (built by them) as a process. make test runs test/sro too;
# e2e-sro runs it alone, verbose, so that its report (the rolling upgrade's per-node timings and
# the seconds each node went without a driver) is printed.
.PHONY: e2e-sro
e2e-sro: tools ## The special-resource-operator's end-to-end suite on kwok (rolling kernel upgrade), with its report
	go test -count=1 -v -timeout 20m ./test/sro

# N kwok nodes over five kernels, 20 SpecialResources; N is 1000 unless given (as bench-hosts').
.PHONY: bench-sro
bench-sro: tools ## N (1000) kwok nodes, 5 kernels, 20 SpecialResources: time to all Ready, operator API writes, RSS, CPU
	go run ./test/bench/sro -n $(N) $(BENCH_SRO_ARGS)

##@ Fault campaign

SEED ?=

# N hosts through register → inspect → provision → live update → deprovision → provision again →
# delete on real Ironic while a seeded schedule kills the operator, Ironic and the API server and
# makes BMCs fail (README, "Fault campaign"). N is 100 unless given (the 1000 above is
# bench-hosts'). SEED replays a schedule. A program like the benchmarks, not part of make test; it
# exits 1 when a check fails. Ironic keeps its database in MariaDB unless IRONIC_USE_MARIADB=false:
# with sqlite's single writer lock, 100 hosts inspecting at once failed inspections with "database
# is locked" faster than they were retried (docs/fault-campaign.md).
.PHONY: chaos
chaos: tools ironic-root ## Fault campaign: N (100) hosts through the lifecycle twice while faults fire (SEED=n replays one; CHAOS_ARGS for more)
	IRONIC_USE_MARIADB=$${IRONIC_USE_MARIADB:-true} go run ./test/chaos -n $(if $(filter command line environment,$(origin N)),$(N),100) $(if $(SEED),-seed $(SEED)) $(CHAOS_ARGS)

##@ bmcsim benchmark

BMCSIM_HOSTS ?= 1000

.PHONY: bench-bmcsim
bench-bmcsim: ## Run bmcsim with BMCSIM_HOSTS (1000) servers; print its RSS and the System GET latency
	go build -o $(BIN)/bmcsim ./cmd/bmcsim
	go run ./hack/bmcsim-bench -bmcsim $(BIN)/bmcsim -hosts $(BMCSIM_HOSTS)
