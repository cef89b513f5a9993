# The front door: `make run` and `make test` do all the setup on a fresh machine.
SHELL := /bin/bash
PYTHON_VERSION := $(shell cat .python-version)
PYTHON ?= $(shell command -v pyenv >/dev/null 2>&1 && pyenv prefix $(PYTHON_VERSION) 2>/dev/null | sed 's|$$|/bin/python|' || command -v python3.12)
VENV := .venv
PY := $(VENV)/bin/python
# Tests use PostgreSQL and Redis, as production does; override to point elsewhere.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/ram
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: run test test-fast install install-dev run-deps system-deps services lint bench clean docs sdk-js sdk-types screenshots test-steel-browser mutate proof proof-short

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt sdk/python/pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet -e sdk/python
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# What running needs: Chromium (Debian's package) and its fonts. Nothing else: no Node.js, no npm.
run-deps:
	bash scripts/system-deps run

# What testing and benchmarking need as well: Node.js, the locked npm packages (tests/js, sdk/js), wrk.
system-deps:
	bash scripts/system-deps

services:
	bash scripts/ensure-services

run: install run-deps
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py run_embedded

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python scripts/module_sizes.py
	$(VENV)/bin/pylint --score=n core accounts computers runs executor visual vault_bridge notifications webhooks ops ramsite bench proof scripts sdk/python/ram_sdk

# Build the TypeScript SDK (sdk/js/dist); its tests run under pytest (tests/e2e/test_js_sdk.py).
sdk-js: system-deps
	cd sdk/js && npm run --silent build && npm run --silent typecheck

# Regenerate the TypeScript SDK's types from the server's schemas (a test fails while they are stale).
sdk-types: install system-deps
	$(PY) scripts/sdk_js_schemas.py
	cd sdk/js && npm run --silent generate

test: install-dev system-deps services lint sdk-js
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		$(VENV)/bin/pytest -p no:cacheprovider $(PYTEST_ARGS)

# The fast tier: unit and database tests only (no browser, no server, no subprocess), under a minute
# on an idle machine; it prints how long it took and the machine's load.
test-fast: install-dev services
	@start=$$EPOCHREALTIME; status=0; \
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		$(VENV)/bin/pytest -p no:cacheprovider -m "unit or db" $(PYTEST_ARGS) || status=$$?; \
	awk -v s="$$start" -v e="$$EPOCHREALTIME" -v l="$$(cut -d' ' -f1-3 /proc/loadavg)" \
		'BEGIN { printf "make test-fast: %.1f s (load average %s)\n", e - s, l }'; \
	exit $$status

# Regenerate docs/rest.md from the OpenAPI document (a test fails while it is stale).
docs: install
	$(PY) scripts/rest_reference.py

# Rewrite docs/screenshots: every person's page at desktop and phone size on fixed demo data and a
# frozen clock (a test fails while they are stale), and the clean screen's pictures.
screenshots: install-dev system-deps services
	rm -f docs/screenshots/[0-9][0-9]-*.png
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		RAM_SCREENSHOTS_DIR=docs/screenshots $(VENV)/bin/pytest -p no:cacheprovider -q \
		tests/e2e/test_screenshots.py tests/e2e/test_view.py tests/e2e/test_view_dialogs.py tests/e2e/test_view_auth.py

# Optional, not in CI: the steel backend against a self-hosted steel-browser built from its
# source with npm and listening at RAM_TEST_STEEL_URL (docs/browsers.md).
test-steel-browser: install-dev system-deps services
	test -n "$(RAM_TEST_STEEL_URL)" || (echo "set RAM_TEST_STEEL_URL=http://host:3000" && exit 2)
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		RAM_TEST_STEEL_URL=$(RAM_TEST_STEEL_URL) $(VENV)/bin/pytest -p no:cacheprovider -q \
		tests/executor/test_backends.py -k self_hosted_steel_browser

bench: install-dev system-deps
	$(PY) -m bench

# The proof (not part of `make test`): RAM's promises under faults, load and hostile input, against
# the production topology it starts for itself on free loopback ports (its own PostgreSQL, Redis,
# OpenBao, two web processes, two workers, two executors); one table, exit 1 unless every row holds.
# The full profile takes about an hour; CI runs the short one (within 10 minutes) after `make test`.
proof: install-dev system-deps
	$(PY) -m proof --profile full $(PROOF_ARGS)

proof-short: install-dev system-deps
	$(PY) -m proof --profile short $(PROOF_ARGS)

# Mutation testing of the modules that enforce the security and exactly-once rules (not part of
# `make test`; about 30 minutes). It edits files in place while it runs: use a clean checkout.
mutate: install-dev services
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		$(PY) scripts/mutate.py $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
