# Baton developer entry points. Everything runs from the project venv (.venv).
# Nothing here downloads browsers or other binaries; PostgreSQL for the tests
# comes from BATON_TEST_DATABASE_URL or a throwaway cluster the test session
# starts itself (scripts/pg_throwaway.sh).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?= -q -n 2

.DEFAULT_GOAL := help
.PHONY: help install test layers demo cli-demo faults faults-ablations bench dagster-dev clean distclean

help:
	@echo "make install      create $(VENV) and install baton with the dev, bench and langgraph extras"
	@echo "make test         run the test suite (pytest $(PYTEST_ARGS))"
	@echo "make layers       lint-imports: the layering contracts in pyproject.toml (also checked by make test)"
	@echo "make demo         the platform: Dagster UI + daemon, dashboard, a live fleet with chaos, after a fresh baton experiment (Ctrl-C stops all)"
	@echo "make cli-demo     baton demo (a scripted run and a small fleet, no Dagster)"
	@echo "make faults       baton faults (the fault matrix: Baton vs two transcript-only controls)"
	@echo "make faults-ablations  every protection switched off in turn; rewrites docs/fault-matrix.md"
	@echo "make bench        baton bench all --out docs (every benchmark; rewrites docs/benchmarks.md)"
	@echo "make dagster-dev  Dagster webserver + daemon on a local instance in .dagster_home"
	@echo "make clean        remove caches and build output (keeps $(VENV))"
	@echo "make distclean    clean, and remove $(VENV)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[dev,bench,langgraph]'
	touch $@

install: $(STAMP)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# tests/test_layering.py runs the same check inside `make test`.
layers: install
	$(BIN)/lint-imports --no-cache

# Embedded defaults: Baton's store in ./.baton, Dagster's instance in ./.dagster_home (SQLite);
# BATON_DATABASE_URL / DAGSTER_PG_URL (postgresql+psycopg2://...) select PostgreSQL instead.
# DEMO_EXPERIMENT / DEMO_PLATFORM change the experiment and the platform's options (ports, fleet size);
# tests/integration/test_make_demo.py runs this target with both.
DEMO_EXPERIMENT ?= --runs 2000 --seed 7 --sweep
DEMO_PLATFORM ?=
demo: install
	$(BIN)/baton experiment $(DEMO_EXPERIMENT)
	$(BIN)/baton platform $(DEMO_PLATFORM)

cli-demo: install
	$(BIN)/baton demo

faults: install
	$(BIN)/baton faults

faults-ablations: install
	$(BIN)/baton faults --ablate all --doc docs/fault-matrix.md

bench: install
	$(BIN)/baton bench all --out docs

dagster-dev: install
	mkdir -p .dagster_home
	ln -sf ../dagster.yaml .dagster_home/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.dagster_home $(BIN)/dagster dev -w workspace.yaml

clean:
	rm -rf build dist .pytest_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
