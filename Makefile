# pyextender: one command for the main job (make run), one for the tests (make test).
# Both set themselves up: a virtualenv with pinned packages, and the upstream
# Kubernetes binaries built from Go modules (cached in ~/.cache/pyextender/bin).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
NAME   ?= demo
NODES  ?= 8

.PHONY: setup binaries lint unit e2e test run cluster-up cluster-down cluster-status bench crds help

help:
	@echo "make run            local cluster + sidecar + example GPU workload, live table"
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

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pyextender.api.volcano.crdgen --check
	$(BIN)/python -m webhook.configuration --check

unit: setup
	$(BIN)/pytest -q tests/unit

e2e: binaries
	$(BIN)/pytest -q tests/e2e

test: lint binaries
	$(BIN)/pytest -q tests

run: binaries
	$(BIN)/python -m devcluster.demo --name $(NAME) --nodes $(NODES)

cluster-up: binaries
	$(BIN)/python -m devcluster --name $(NAME) up --nodes $(NODES) --sidecar

cluster-down: setup
	$(BIN)/python -m devcluster --name $(NAME) down

cluster-status: setup
	$(BIN)/python -m devcluster --name $(NAME) status

bench: binaries
	$(BIN)/python bench/verbs.py
	$(BIN)/python bench/kernels.py

crds: setup
	$(BIN)/python -m pyextender.api.volcano.crdgen
