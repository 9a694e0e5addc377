# Quick start on a fresh Debian machine (root): `make demo`, `make test`.
# `setup` is idempotent: a venv with the project and its dev tools, then the tool's own
# `bakeoff-sandbox doctor --fix` for what the bundled example needs: a Docker engine that
# answers (installed and started only when none does; its pid and log in .state/), Docker
# Compose (the pinned version, in the per-user cache) and the locally built images. It
# ends with every check ok, or says which is not and the command that fixes it.

VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin

.PHONY: setup venv test lint unit integration demo bench clean

# Only what the bundled example (and so `make demo`) uses: base, python, postgres. Any other
# image of images/ (go, node, rust) is built the first time a manifest or a test uses it;
# `bakeoff-sandbox images build --all` builds every one now.
setup: venv
	BAKEOFF_STATE_DIR=.state $(BIN)/bakeoff-sandbox doctor --fix -f examples/horizon/bakeoff.toml

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v git >/dev/null || (apt-get update -qq && apt-get install -y -qq git)
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || \
	  (apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV))
	$(BIN)/pip install -q --upgrade pip
	@# An editable install makes setuptools print a 10-line warning; it says nothing here.
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	@touch $@

lint: venv
	$(BIN)/ruff check runner rig gateway tests bench
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit

# The suite is mostly containers, and mostly waiting on them: three workers on two cores,
# a test file each at a time (a module's shared lab stays in one worker), 18-19 minutes
# where two took 23 (docs/benchmarks.md). Three heavy modules at once need more networks
# than dockerd's default pools: the engine scripts/ensure-engine.sh starts has 256, so
# three workers when the engine is that one (its command line says so), two otherwise;
# read when the recipe runs, after `setup` started the engine. JOBS=0: one process.
# The files in the collection's order, the longest first (tests/integration/longest.py):
# xdist would otherwise start the files with the fewest tests, the longest here, last.
JOBS ?= $(shell grep -qs default-address-pool /proc/$$(cat .state/dockerd.pid 2>/dev/null)/cmdline && echo 3 || echo 2)
WORKERS = $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile --no-loadscope-reorder)
# The package compiled once: with PYTHONDONTWRITEBYTECODE set (as on these machines) every
# `python -m runner.cli` a test starts compiled it again, 0.2 s of CPU each
# (docs/benchmarks.md); a stale file is never read (Python checks the source's mtime).
COMPILED = $(BIN)/python -m compileall -q runner rig gateway
integration: setup
	$(COMPILED)
	$(BIN)/pytest $(WORKERS) tests/integration

test: setup lint
	$(COMPILED)
	$(BIN)/pytest $(WORKERS)

demo: setup
	$(BIN)/bakeoff-sandbox demo

bench: setup
	$(BIN)/python bench/up_down.py

clean:
	rm -rf $(VENV) .state .mypy_cache .ruff_cache .pytest_cache
