# The two commands of the README. Both build .venv from pyproject.toml on first use.
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

.PHONY: demo test bench bench-peers
demo: $(VENV)/.installed
	$(VENV)/bin/freshness demo

# Two workers on two cores (pytest-xdist); worksteal evens out the long replays at the end.
test: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider -n auto --dist worksteal

bench: $(VENV)/.installed
	$(PY) -m bench.run

# LangChain and LlamaIndex on the shipped corpora (docs/benchmarks.md); needs the [peers] extra.
bench-peers: $(VENV)/.installed
	$(VENV)/bin/pip install -q -e '.[peers]'
	$(PY) -m bench.peers
