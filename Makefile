# faultload: `make run` runs the main job on the embedded default target,
# `make test` runs the tests. Both install what they need first, idempotently.
PYTHON ?= python3.11
VENV := .faultload/venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.faultload-deps
SETUP_LOG := .faultload/setup.log
TOXIPROXY := .faultload/tools/toxiproxy-server
TARGETS ?= skyrl==0.4.0 skyrl==0.3.0 tuft==0.2.2 hatchery==0.3.0 twinkle==0.5.1
# What `make test` installs: the targets its tests launch, every one but twinkle-kit (~1 GB of Ray and model
# libraries; its test is slow-marked, for `make test-all`, which runs after `make setup`).
TEST_TARGETS ?= $(filter-out twinkle==%,$(TARGETS))
# SDK releases besides the one installed with faultload, each in a folder of its own (--sdk, --faultload-sdk).
SDKS ?= tinker==0.38.0
# The HTML report's browser test opens a report in Debian's headless chromium (installed once, when missing).
BROWSER_STAMP := .faultload/.chromium
# tests/integration/test_access_integration.py puts a real TLS-terminating proxy, Debian's stunnel4, in front of a
# key-checking server.
STUNNEL_STAMP := .faultload/.stunnel
# tests/repo/test_action.py lints the example workflows with actionlint, built from its Go module once.
ACTIONLINT := .faultload/tools/actionlint
ACTIONLINT_VERSION := v1.7.7

.PHONY: setup targets run test test-all unit docs clean

setup: $(DEPS_STAMP) targets

$(DEPS_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[plot,ray,test,docs]' 'setuptools>=68'  # setuptools: tests build a wheel offline with it
	touch $(DEPS_STAMP)

$(ACTIONLINT):
	@mkdir -p .faultload/tools
	GOBIN=$(abspath .faultload/tools) $${GO:-go} install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

$(STUNNEL_STAMP):
	@mkdir -p .faultload
	command -v stunnel4 >/dev/null || apt-get install -y -q stunnel4 >/dev/null || \
		(apt-get update -q >/dev/null && apt-get install -y -q stunnel4 >/dev/null)
	touch $@

$(BROWSER_STAMP):
	@mkdir -p .faultload
	command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null || \
		(apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)
	touch $@

# `faultload setup` builds the compiled router (faultload/router/go) and then
# Toxiproxy (from its Go module) into .faultload/tools (each when missing),
# beside installing the targets (when missing).
targets: $(DEPS_STAMP)
	$(BIN)/faultload setup $(addprefix --target ,$(TARGETS)) $(addprefix --sdk ,$(SDKS))

run: setup
	mkdir -p reports
	$(BIN)/faultload run --json-out reports/run.json

# Everything but the minutes-long integration tests (CI has a 30-minute budget).
# The unit tier (pure, each test on its own tmp dirs, tagged processes) runs on
# both cores: 421 s -> 229 s here. It needs the suite's venv, the compiled router
# and client and Toxiproxy (its tests run them), so it starts once setup has built
# Toxiproxy, which setup builds after the router and client (~2 min, or at once when all are there) and runs while setup installs
# the targets (downloads and a 4.9 GB torch, mostly). Setup's output is printed after the tier's and its failure fails the
# target; a Ctrl-C stops its whole process group (a background job of a
# non-interactive shell ignores SIGINT, hence setsid and the trap; dash takes
# `kill -TERM -PGID`, not `kill -- -PGID`). The integration tier runs real
# servers after both, two test files at once (`--dist loadfile`: a file's tests
# share one worker, so the Ray tests never start two clusters at once): its
# trials mostly wait on timers (the machine 65% busy), 637 s -> 332 s here.
# Each tier names its 15 slowest tests (what CI's time goes to).
test: $(DEPS_STAMP) $(BROWSER_STAMP) $(STUNNEL_STAMP) $(ACTIONLINT)
	@mkdir -p .faultload; \
	setsid $(BIN)/faultload setup $(addprefix --target ,$(TEST_TARGETS)) $(addprefix --sdk ,$(SDKS)) > $(SETUP_LOG) 2>&1 & setup=$$!; \
	trap 'kill -TERM -$$setup 2>/dev/null; exit 130' INT TERM; \
	echo "faultload setup runs beside the unit tier (its output: $(SETUP_LOG))"; \
	while [ ! -x $(TOXIPROXY) ] && kill -0 $$setup 2>/dev/null; do sleep 1; done; \
	FAULTLOAD_TESTS_REQUIRE_BUILT=1 $(BIN)/python -m pytest -q tests -m "not integration and not slow" -n 2 --durations=15; unit=$$?; \
	wait $$setup; installed=$$?; cat $(SETUP_LOG); \
	if [ $$installed -ne 0 ]; then echo "make test: faultload setup failed (exit $$installed), see above"; exit $$installed; fi; \
	exit $$unit
	FAULTLOAD_TESTS_REQUIRE_BUILT=1 $(BIN)/python -m pytest -q tests -m "integration and not slow" -n 2 --dist loadfile --durations=15

# All tests, the slow ones too (nightly).
test-all: setup $(BROWSER_STAMP) $(STUNNEL_STAMP) $(ACTIONLINT)
	FAULTLOAD_TESTS_REQUIRE_BUILT=1 $(BIN)/python -m pytest -q tests

# The docs site (MkDocs + mkdocs-material) into site/; strict: a broken link, a bad anchor or a page
# missing from the nav fails it (the unit tier builds it too: tests/repo/test_docs_site.py).
docs: $(DEPS_STAMP)
	$(BIN)/mkdocs build --strict

unit: $(DEPS_STAMP)
	$(BIN)/python -m pytest -q tests -m "not integration"

clean:
	rm -rf .faultload reports site
