# The two commands of the README. Both build .venv from pyproject.toml on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

.PHONY: demo test lint bench bench-peers
demo: $(VENV)/.installed
	$(VENV)/bin/freshness demo

# pytest-xdist, one worker more than the cores: a test waiting on its subprocesses, servers
# or timeouts leaves its core to another (the worker counts compared: docs/benchmarks.md).
# Python counts the cores (macOS has no nproc); worksteal evens out the long tests at the end.
TEST_WORKERS ?= $(shell python3 -c 'import os; print((os.cpu_count() or 1) + 1)')
test: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal

# ruff, then mypy (configured in pyproject.toml: strict on core/ and pipeline/ports.py).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(VENV)/.installed
	$(PY) -m bench.run

# LangChain and LlamaIndex on the shipped corpora (docs/benchmarks.md); needs the [peers] extra.
bench-peers: $(VENV)/.installed
	$(VENV)/bin/pip install -q -e '.[peers]'
	$(PY) -m bench.peers
