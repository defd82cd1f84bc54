# Two commands do everything on a fresh clone: `make demo` and `make test`.
# Each creates the virtualenv and installs the package with its dependencies first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint system-deps r-bridge vignettes bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dask]'
	touch $(STAMP)

# The main job (the README's command): the shipped report, replacing an earlier one.
demo: $(STAMP)
	$(BIN)/yieldwise demo --out demo-output --overwrite

# Debian packages for the browser and R tests, installed when missing (needs root).
system-deps:
	bash tools/system-deps.sh

# rpy2 builds against the installed R, so it comes after system-deps, and only with R.
r-bridge: $(STAMP) system-deps
	@if $(BIN)/python -c "import rpy2.robjects" 2>/dev/null; then :; \
	elif command -v R >/dev/null; then $(BIN)/python -m pip install --quiet -e '.[r]'; \
	else echo "R not found: the R bridge tests skip (and fail under CI=true)"; fi

lint: $(STAMP)
	$(BIN)/ruff check yieldwise tests bench
	$(BIN)/ruff format --check yieldwise tests bench

test: lint r-bridge
	$(BIN)/python -m pytest

# Execute every vignette with full sampler settings and render it to docs/vignettes/.
vignettes: r-bridge
	$(BIN)/jupyter nbconvert --to html --execute --ExecutePreprocessor.timeout=3600 \
		--output-dir docs/vignettes vignettes/*.ipynb

bench: $(STAMP)
	$(BIN)/python bench/bench_audit.py --write

clean:
	rm -rf $(VENV) demo-output build *.egg-info .pytest_cache .ruff_cache
