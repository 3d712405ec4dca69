# Two entry points for a fresh machine: `make demo` and `make test`.
VENV    ?= .venv
PYTHON  ?= python3
BIN      = $(VENV)/bin
STAMP    = $(VENV)/.installed
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: demo test test-fast bench lint check-env clean

demo: check-env $(STAMP)
	$(BIN)/treestore demo

test: check-env $(STAMP)
	$(BIN)/python -m pytest

# Every test that needs no Spark (no JVM starts): under a minute on 2 cores.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not spark"

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

check-env:
	@sh scripts/check-java.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

clean:
	rm -rf $(VENV) demo-work .pytest_cache
