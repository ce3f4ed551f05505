# The two commands the README starts with: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
DEMO_DIR ?= .scholar-es-demo

.PHONY: install demo test test-fast smoke lint bench clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	# CPU torch first: it lies on this kind of machine's disk; plain `torch` would pull a CUDA build
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	rm -rf $(DEMO_DIR)
	$(VENV)/bin/scholar-es index scripts/demo_papers.jsonl --es $(DEMO_DIR) --quiet
	$(PY) scripts/demo.py --es $(DEMO_DIR)
	@echo
	@echo "Next: source $(VENV)/bin/activate, then e.g. scholar-es indices --es $(DEMO_DIR) (README: Getting started)"

test: install
	$(PY) -m pytest -q
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHON=$(PY) bash scripts/wheel_smoke.sh

# The inner loop: no `slow` test (model, shared data, served processes), no browser, no wheel build.
test-fast: install
	$(PY) -m pytest -q -m "not slow and not browser"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Build the wheel, install it into a fresh venv, index and search the demo from a foreign project.
smoke: install
	PYTHON=$(PY) bash scripts/wheel_smoke.sh

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: install
	$(PY) bench/engine_latency.py --quick

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .ruff_cache
