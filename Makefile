# The README's two commands: `make test` and `make verify`. Both bootstrap .venv on first use
# and reinstall when pyproject.toml changes; nothing else needs to be installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SEED   ?= 20261130
# mpiexec (from the mpich wheel) and the leasefence script live in the virtualenv.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: test verify lint bench compile bytecode clean help
.DEFAULT_GOAL := help

help:
	@echo "make test    - set up .venv if needed, then lint, type-check and run the pytest suite"
	@echo "make verify  - set up .venv if needed, then run every verification layer (leasefence verify)"
	@echo "make bench   - run the side-by-side benchmarks (leasefence bench)"
	@echo "make compile - build the compiled trace validator and dispatcher (leasefence trace compile)"
	@echo "make clean   - remove .venv and generated reports"

# editable_mode=compat: the editable install is one path entry (this folder) in a .pth file,
# not setuptools' default import-hook finder, whose .pth imports pathlib, re, urllib.parse and
# importlib.util at every interpreter start (python -c pass: 88 -> 39 M instructions). The
# package is found through the leasefence/model, impl and conformance symlinks; leasefence.spec
# (tla/) is package data only a wheel needs (leasefence.paths.spec_dir reads tla/ here).
# setuptools (84 here) calls compat mode transitional: should a release drop it, the install
# falls back to the default mode, slower to start but the same package.
# The Makefile is a prerequisite so that an older .venv is reinstalled in this mode.
$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "leasefence needs Python >= 3.11; found " + sys.version.split()[0] + " (set PYTHON=...)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat \
	  || { echo "make: the compat editable install failed (above); installing in setuptools' default editable mode (slower to start)"; \
	       $(BIN)/python -m pip install --quiet -e '.[dev]'; }
	@touch $(STAMP)

# The sources' bytecode caches (__pycache__), written for the files changed since the last run:
# pip does not compile an editable install's sources, and where PYTHONDONTWRITEBYTECODE is set
# (container images often set it, as this machine does) Python never writes them, so every
# process compiled every module it imported again: each rank of `mpiexec -n 4 leasefence run`
# spent ~50 ms more starting (255 against 206 ms of CPU), a fresh clone's whole 2,000-task job
# 0.88 s against 0.80 (issue 19). Python still checks each cache against its source's size and
# time, so an edited file is read from source until the next run. The four folders are named
# apart: compileall does not follow leasefence/'s symlinks to them. A cache it cannot write (a
# read-only checkout, a source that does not compile: ruff names it) stops nothing: that
# source is compiled by each process, as before.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q leasefence model impl conformance \
	  || echo "make: some bytecode caches were not written (above): those sources are compiled by every process"

lint: bytecode
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy leasefence

test: lint
	$(BIN)/pytest -m "not slow" --hypothesis-seed=$(SEED) $(PYTEST_ARGS)

verify: bytecode
	$(BIN)/leasefence verify $(VERIFY_ARGS)

bench: bytecode
	$(BIN)/leasefence bench $(BENCH_ARGS)

compile: bytecode
	$(BIN)/leasefence trace compile

clean:
	rm -rf $(VENV) reports .pytest_cache .mypy_cache .ruff_cache .hypothesis
