# Tailor — see README.md. `make test` is what CI runs.
SHELL := /usr/bin/env bash
BIN := $(CURDIR)/bin
export TAILOR_BIN_DIR := $(BIN)
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m

.PHONY: all build image tools generate verify-generate fmt vet lint test test-unit fidelity chart-test image-test bench bench-karpenter fuzz demo clean

all: build

# What `tailor version` prints; unstamped builds say dev/unknown.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(BUILD_DATE)

## build: the tailor binary in bin/, stamped with version, commit and build date
build:
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/tailor ./cmd/tailor

## image: a multi-arch (linux/amd64, linux/arm64) OCI image of a static tailor binary,
## built without a Docker daemon (hack/image) into out/tailor-image (an OCI layout)
## and out/tailor-image.tar (that layout as one tarball)
IMAGE ?= ghcr.io/nodetailor/tailor:$(VERSION)
PLATFORMS ?= linux/amd64,linux/arm64
image:
	@mkdir -p out/image-bin
	@for p in $$(echo $(PLATFORMS) | tr , ' '); do \
	  os=$${p%/*}; arch=$${p#*/}; echo "image: building tailor for $$p"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(LDFLAGS)" \
	    -o out/image-bin/tailor-$$os-$$arch ./cmd/tailor || exit 1; \
	done
	cd hack/image && go run . -binaries ../../out/image-bin -platforms $(PLATFORMS) \
	  -image $(IMAGE) -version $(VERSION) -revision $(COMMIT) -created $(BUILD_DATE) \
	  -layout ../../out/tailor-image -tarball ../../out/tailor-image.tar

## tools: the local control plane (etcd, kube-apiserver, kube-scheduler,
## kube-controller-manager, kwok) and controller-gen, built from source from the Go
## module proxy; TOOLS="kwok controller-gen" builds only those (control-plane: all but
## controller-gen). A first run takes minutes (README.md); after that, a second.
TOOLS :=
tools:
	@bash hack/tools.sh $(TOOLS)

## generate: deepcopy functions and CRDs from api/ (the CRDs copied into
## charts/tailor-crd), and the chart's RBAC from the +kubebuilder:rbac markers
generate: tools
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
	go run ./hack/crdpatch config/crd
	cp config/crd/*.yaml charts/tailor-crd/templates/
	bash hack/generate-rbac.sh

## verify-generate: fails when the generated files are stale
verify-generate: tools
	@bash hack/verify-generate.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

## lint / vet: gofmt, go vet, and go.mod as `go mod tidy` leaves it
lint vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	@go mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	@# The chart and image modules import the main module (hack/chart also internal/fakeaws):
	@# a new import there changes what they need.
	@for m in hack/chart hack/image hack/eksnode hack/karpenter; do (cd $$m && go mod tidy -diff) || { echo "$$m: go.mod or go.sum is not tidy: cd $$m && go mod tidy"; exit 1; }; done
	@# The fake AWS's node referee is a module of its own (the kubelet's packages need
	@# k8s.io/kubernetes's replace directives); so is Karpenter's kwok controller
	@# (newer Kubernetes libraries than ours), which only bench-karpenter builds.
	cd hack/eksnode && go vet ./...
	cd hack/karpenter && go vet ./...

## test: builds the tools if needed, checks formatting, vet and generated files, then
## runs every test with the race detector, and the differential test against the
## kube-scheduler's own filter plugins
test: tools lint verify-generate
	@# The end-to-end suite on the fake AWS runs beside everything else (mostly
	@# waiting, it adds about a minute); its output follows the rest.
	@mkdir -p out
	TAILOR_E2E_CLOUD=aws go test $(GO_TEST_FLAGS) ./test/e2e/ > out/e2e-aws.log 2>&1 & aws=$$!; \
	TAILOR_E2E_CLOUD=sim go test $(GO_TEST_FLAGS) ./...; sim=$$?; \
	wait $$aws; awsrc=$$?; echo "--- test/e2e with TAILOR_E2E_CLOUD=aws:"; cat out/e2e-aws.log; \
	[ $$sim -eq 0 ] && [ $$awsrc -eq 0 ]
	$(MAKE) fidelity
	$(MAKE) image-test
	$(MAKE) chart-test

## fidelity: our feasibility check against the kube-scheduler's filter plugins
## (hack/fidelity, a module of its own since it imports k8s.io/kubernetes)
fidelity:
	cd hack/fidelity && go vet ./... && go test $(GO_TEST_FLAGS) ./...

## image-test: the image builder (hack/image) builds an image from freshly
## cross-compiled binaries and reads it back, and tailor built as the image target
## builds it (with these LDFLAGS) is static and reports its stamped version
image-test:
	cd hack/image && go vet ./... && TAILOR_IMAGE_LDFLAGS='$(LDFLAGS)' go test $(GO_TEST_FLAGS) ./...

## chart-test: the Helm charts rendered, linted and applied to a real API server,
## where the controller provisions with the chart's ServiceAccount (hack/chart)
chart-test: tools
	cd hack/chart && go vet ./... && go test $(GO_TEST_FLAGS) ./...

## bench: the scheduling benchmarks (Karpenter's published mix, and the AWS catalog)
BENCH ?= .
bench:
	go test -run '^$$' -bench '$(BENCH)' -benchtime 3x -benchmem ./pkg/scheduling/

## bench-karpenter: Tailor and Karpenter side by side on one local control plane
## (test/sidebyside; docs/benchmarks.md): builds Karpenter's kwok controller
## (hack/karpenter) first. SIDEBYSIDE_ENV adds settings, e.g.
## SIDEBYSIDE_ENV="TAILOR_SIDEBYSIDE_LATENCY=realistic TAILOR_SIDEBYSIDE_NODECOST=on"
SIDEBYSIDE_ENV ?=
bench-karpenter:
	@bash hack/tools.sh control-plane karpenter-kwok
	TAILOR_SIDEBYSIDE=1 $(SIDEBYSIDE_ENV) go test -count=1 -v -timeout 3h ./test/sidebyside/

## fuzz: each fuzz target for FUZZTIME (default 1m)
FUZZTIME ?= 1m
fuzz:
	go test -run '^$$' -fuzz '^FuzzRequirementIntersection$$' -fuzztime $(FUZZTIME) ./pkg/scheduling/
	go test -run '^$$' -fuzz '^FuzzSolve$$' -fuzztime $(FUZZTIME) ./pkg/scheduling/
	go test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./pkg/simulate/

## test-unit: only the tests that need no control plane and no tool from bin/
## (hack/unit-packages.sh lists them): the inner loop
test-unit:
	go test $(GO_TEST_FLAGS) $$(bash hack/unit-packages.sh)

## demo: the README's main job — a sandbox cluster autoscaling the seed example; it
## builds only the tools the sandbox runs (not controller-gen)
demo: build
	@bash hack/tools.sh control-plane
	@bash hack/demo.sh

clean:
	rm -rf $(BIN) out
