# pyextender: one command for the main job (make run), one for the tests (make test).
# Both set themselves up: a virtualenv with pinned packages, and the upstream
# Kubernetes binaries built from Go modules (cached in ~/.cache/pyextender/bin).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
NAME   ?= demo
NODES  ?= 8
MODE   ?= extender
GO     ?= go
GOBIN  := $(shell $(GO) env GOPATH 2>/dev/null)/bin
# protoc plugins for the shim's Go code (pinned; see pyextender/server/grpc_codegen.py)
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
# the shim's Go tests compile with the flags devcluster builds with, to reuse Go's cache
SHIM_GOENV := CGO_ENABLED=0 GOFLAGS=-mod=mod

.PHONY: setup binaries lint chart-lint unit e2e test run cluster-up cluster-down cluster-status bench crds help \
	proto proto-tools shim-test

help:
	@echo "make run            local cluster + sidecar + example GPU workload, live table"
	@echo "                    (MODE=framework: kube-scheduler with the gRPC shim; gangs held at its barrier, wait in Permit)"
	@echo "make test           lint (ruff, mypy --strict), unit and e2e tests on a real devcluster"
	@echo "make cluster-up     start a devcluster (NAME=$(NAME) NODES=$(NODES)) with the sidecar"
	@echo "make cluster-down   stop it (no process left behind)"
	@echo "make bench          benchmarks in bench/ (tables + one JSON line each)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

binaries: setup
	$(BIN)/python -m devcluster build

proto-tools:
	@test -x $(GOBIN)/protoc-gen-go || $(GO) install $(PROTOC_GEN_GO)
	@test -x $(GOBIN)/protoc-gen-go-grpc || $(GO) install $(PROTOC_GEN_GO_GRPC)

proto: setup proto-tools
	$(BIN)/python -m pyextender.server.grpc_codegen

shim-test:
	@test -z "$$(gofmt -l shim)" || (gofmt -l shim; echo "gofmt: files above need formatting"; exit 1)
	cd shim && $(SHIM_GOENV) $(GO) vet -trimpath ./...
	cd shim && $(SHIM_GOENV) $(GO) test -trimpath ./...

lint: setup proto-tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy bench  # the benches too (strict, from pyproject)
	$(BIN)/python -m pyextender.api.volcano.crdgen --check
	$(BIN)/python -m devcluster.volcano_crds.generate --check
	$(BIN)/python -m webhook.configuration --check
	$(BIN)/python -m pyextender.server.grpc_codegen --check

unit: setup
	$(BIN)/pytest -q tests/unit

e2e: binaries
	$(BIN)/pytest -q tests/e2e

chart-lint: binaries
	"$$($(BIN)/python -c 'from devcluster.build import binary_path; print(binary_path("helm"))')" \
		lint --strict charts/pyextender

test: lint shim-test binaries chart-lint
	$(BIN)/pytest -q tests

run: binaries
	$(BIN)/python -m devcluster.demo --name $(NAME) --nodes $(NODES) --mode $(MODE)

cluster-up: binaries
	$(BIN)/python -m devcluster --name $(NAME) up --nodes $(NODES) --sidecar --mode $(MODE)

cluster-down: setup
	$(BIN)/python -m devcluster --name $(NAME) down

cluster-status: setup
	$(BIN)/python -m devcluster --name $(NAME) status

bench: binaries
	$(BIN)/python bench/verbs.py
	$(BIN)/python bench/grpc_verbs.py
	$(BIN)/python bench/kernels.py

crds: setup
	$(BIN)/python -m pyextender.api.volcano.crdgen
	$(BIN)/python -m devcluster.volcano_crds.generate
