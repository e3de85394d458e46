# The two commands of the README. Both build .venv from pyproject.toml on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

# constraints.txt: the tested release of every package, so CI installs what was tested.
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

.PHONY: demo test lint bench bench-peers bench-overhead bench-retrieval bench-long-pages bench-long-text
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

# What a refresh, `status` and `search` cost a user beyond their work (docs/benchmarks.md).
bench-overhead: $(VENV)/.installed
	$(PY) -m bench.overhead

# LangChain and LlamaIndex on the shipped corpora (docs/benchmarks.md); needs the [peers] extra.
bench-peers: $(VENV)/.installed
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[peers]'
	$(PY) -m bench.peers

# What one edit in a long changelog or table costs, against its floor and LangChain (docs/benchmarks.md).
bench-long-pages: $(VENV)/.installed
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[peers]'
	$(PY) -m bench.long_pages

# Seconds per page for 1 MB of text in one token, one line and one code block (docs/benchmarks.md).
bench-long-text: $(VENV)/.installed
	$(PY) -m bench.long_text

# Hit@1/hit@5/MRR of vector, full-text and hybrid search on the shipped corpora (docs/benchmarks.md).
bench-retrieval: $(VENV)/.installed
	$(PY) -m bench.retrieval
