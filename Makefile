# Two entry points for a fresh machine: `make demo` and `make test`.
VENV    ?= .venv
PYTHON  ?= python3
BIN      = $(VENV)/bin
STAMP    = $(VENV)/.installed
DEV      = $(VENV)/.installed-dev
# pip without the chatter: errors still show (the machine's own pip settings may add warnings)
PIP      = $(BIN)/python -m pip --quiet --disable-pip-version-check --no-input
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: demo test test-fast fuzz reliability bench lint docs check-env check-browser clean

demo: check-env $(STAMP)
	$(BIN)/treestore demo

# The whole suite on two workers (pytest-xdist): each has its own local SparkSession;
# the tests of each of the run's servers (cluster, Spark Connect, serve, browser) run on
# one worker (tests/conftest.py), so each server starts once. Bytecode is cached as in
# test-fast. On 2 cores 10-12 minutes (14.5-15.5 in one process).
test: check-env check-browser $(DEV)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 2 --dist loadgroup

# The cheap tests: no Spark (no JVM starts), no cluster, no S3 server, no browser, nothing
# slow (the markers in pyproject.toml): under a minute on 2 cores. They run on every core
# (pytest-xdist), property tests draw a quarter of make test's examples (the profile "fast"
# of tests/support/profiles.py; set TREESTORE_HYPOTHESIS_PROFILE to choose another), and
# compiled modules are cached in __pycache__ even where PYTHONDONTWRITEBYTECODE is set
# (compiling them all again at every run, and in every subprocess the tests start, costs
# seconds).
test-fast: $(DEV)
	env -u PYTHONDONTWRITEBYTECODE TREESTORE_HYPOTHESIS_PROFILE=$${TREESTORE_HYPOTHESIS_PROFILE:-fast} \
	  $(BIN)/python -m pytest -q -n auto -m "not (spark or cluster or s3 or browser or connect or slow)"

# A long fuzz round of the three parsers (paths, ops, job files; 34,000 inputs each,
# about 100k in all): counts per parser, exit 1 on any crash.
fuzz: $(DEV)
	$(BIN)/python -m tests.reliability.fuzz --examples 34000

# The fault matrix of docs/reliability.md: 100 kills, 5 races, 20 kills of a load into a store on
# S3, 20 kills each of a follower, a sweep and a gc, power cuts, disk full, the named damage and
# bad-input cases, ~100k fuzz inputs; prints the table (about 25 minutes, 7 to 10 more for the
# kills on S3; a run of 8, 6 and 10 kills of a follower, a sweep and a gc took 5).
reliability: check-env $(DEV)
	TREESTORE_KILL_ROUNDS=100 TREESTORE_RACE_ROUNDS=5 TREESTORE_S3_KILL_ROUNDS=20 \
	  TREESTORE_FUZZ_EXAMPLES=34000 \
	  TREESTORE_KILL_FOLLOW_ROUNDS=20 TREESTORE_KILL_SWEEP_ROUNDS=20 TREESTORE_KILL_GC_ROUNDS=20 \
	  $(BIN)/python -m tests.reliability.table

lint: $(DEV)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

# The documentation site (mkdocs, material theme) into build/site/: a broken link or anchor
# is an error. tests/test_docs.py runs the same build, and every snippet of the pages.
docs: $(DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

check-env:
	@sh scripts/check-java.sh

# The page's browser tests (marker browser) need Debian's chromium and its driver.
check-browser:
	@sh scripts/check-chromium.sh

# The demo needs treestore alone; the tests, lint and fuzz add the dev extra on top.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV): treestore and its pinned packages, then its compiled kernels (once, about a minute)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install -e .
	@$(BIN)/python -c "from treestore import native; native.warm()"
	@touch $@

$(DEV): $(STAMP)
	@echo "adding the dev packages to $(VENV) (tests, lint, build)"
	@$(PIP) install -e '.[dev]'
	@touch $@

clean:
	rm -rf $(VENV) demo-work .pytest_cache
