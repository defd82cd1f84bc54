# Two commands do everything on a fresh clone: `make demo` and `make test`.
# Each creates the virtualenv and installs the package with its dependencies first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/yieldwise demo --out demo-output

lint: $(STAMP)
	$(BIN)/ruff check yieldwise tests bench

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/bench_audit.py --write

clean:
	rm -rf $(VENV) demo-output build *.egg-info .pytest_cache .ruff_cache
