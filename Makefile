# faultload: `make run` runs the main job on the embedded default target,
# `make test` runs the tests. Both install what they need first, idempotently.
PYTHON ?= python3.11
VENV := .faultload/venv
BIN := $(VENV)/bin
DEPS_STAMP := $(VENV)/.faultload-deps
TARGETS ?= skyrl==0.4.0 skyrl==0.3.0

.PHONY: setup targets run test test-all unit clean

setup: $(DEPS_STAMP) targets

$(DEPS_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[plot,ray,test]' 'setuptools>=68'  # setuptools: tests build a wheel offline with it
	touch $(DEPS_STAMP)

# `faultload setup` builds Toxiproxy into .faultload/tools from its Go module
# (when missing), then installs the targets (when missing).
targets: $(DEPS_STAMP)
	$(BIN)/faultload setup $(addprefix --target ,$(TARGETS))

run: setup
	mkdir -p reports
	$(BIN)/faultload run --json-out reports/run.json

# Everything but the minutes-long integration tests (CI has a 30-minute budget).
# The unit tier (pure, each test on its own tmp dirs, tagged processes) runs on
# both cores: 421 s -> 229 s here; the integration tier runs real servers and
# trials whose timing the other core's load would change, so it runs alone.
test: setup
	$(BIN)/python -m pytest -q tests -m "not integration and not slow" -n 2
	$(BIN)/python -m pytest -q tests -m "integration and not slow"

# All tests, the slow ones too (nightly).
test-all: setup
	$(BIN)/python -m pytest -q tests

unit: $(DEPS_STAMP)
	$(BIN)/python -m pytest -q tests -m "not integration"

clean:
	rm -rf .faultload reports
