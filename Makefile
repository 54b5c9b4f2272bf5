# Tailor — see README.md. `make test` is what CI runs.
SHELL := /usr/bin/env bash
BIN := $(CURDIR)/bin
export TAILOR_BIN_DIR := $(BIN)
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m

.PHONY: all build tools generate verify-generate fmt vet lint test test-unit fidelity bench fuzz demo clean

all: build

## build: the tailor binary in bin/
build:
	go build -o $(BIN)/tailor ./cmd/tailor

## tools: the local control plane (etcd, kube-apiserver, kube-scheduler,
## kube-controller-manager, kwok) and controller-gen, built from the Go module proxy
tools:
	@bash hack/tools.sh

## generate: deepcopy functions and CRDs from api/
generate: tools
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd

## verify-generate: fails when the generated files are stale
verify-generate: tools
	@bash hack/verify-generate.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

## lint / vet: gofmt and go vet
lint vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...

## test: builds the tools if needed, checks formatting, vet and generated files, then
## runs every test with the race detector, and the differential test against the
## kube-scheduler's own filter plugins
test: tools lint verify-generate
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) fidelity

## fidelity: our feasibility check against the kube-scheduler's filter plugins
## (hack/fidelity, a module of its own since it imports k8s.io/kubernetes)
fidelity:
	cd hack/fidelity && go vet ./... && go test $(GO_TEST_FLAGS) ./...

## bench: the scheduling benchmarks (Karpenter's published mix, and the AWS catalog)
BENCH ?= .
bench:
	go test -run '^$$' -bench '$(BENCH)' -benchtime 3x -benchmem ./pkg/scheduling/

## fuzz: each fuzz target for FUZZTIME (default 1m)
FUZZTIME ?= 1m
fuzz:
	go test -run '^$$' -fuzz '^FuzzRequirementIntersection$$' -fuzztime $(FUZZTIME) ./pkg/scheduling/
	go test -run '^$$' -fuzz '^FuzzSolve$$' -fuzztime $(FUZZTIME) ./pkg/scheduling/
	go test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./pkg/simulate/

## test-unit: only the tests that need no control plane
test-unit:
	go test $(GO_TEST_FLAGS) ./api/... ./pkg/...

## demo: the README's main job — a sandbox cluster autoscaling the seed example
demo: tools build
	@bash hack/demo.sh

clean:
	rm -rf $(BIN)
