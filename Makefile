# Two commands get a new user from nothing to a result: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck unit suite test-tools bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install only when the project's dependencies change.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,watch-test]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,watch-test,bench]'
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/mlcopilot demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src standin testing tests scripts benchmarks
	$(BIN)/ruff format --check src standin testing tests scripts benchmarks
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# Tools some tests drive, from Debian: Chromium for the browser tests (tests/browser/), and
# shellcheck for the CI example scripts. Installed here when missing and we are root (CI, the
# dev machines); otherwise nothing happens and those tests skip, saying why. A failed install
# does not stop the rest of the suite.
test-tools:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium fonts-dejavu-core"; \
	command -v shellcheck >/dev/null 2>&1 || missing="$$missing shellcheck"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's$$missing for the tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing >/dev/null) \
		|| echo "warning: could not install$$missing; the tests that need it will skip"; \
	fi

# Two tiers (markers in pyproject.toml): `make unit` leaves out the tests marked `slow` (a real
# process, the Kafka broker, Chromium, a pip install); `make test` runs lint, types, import
# contracts and every test. Both on three workers, one more than the two CPUs the suite is sized
# for: a third of the suite's time is tests waiting (on a deadline, a lease, a broker, another
# process), and a third worker fills it (one 2-CPU host: 4:57 on three workers, 6:14 on two
# without even the browser tests). The slowest tests are listed at the end.
PYTEST := $(BIN)/pytest -q -n 3 --dist loadgroup --durations=25

unit: $(VENV)/.installed-dev
	$(PYTEST) -m "not slow"

suite: $(VENV)/.installed-dev test-tools
	$(PYTEST)

# mypy alongside the suite, not before it: a fresh clone's mypy takes 85 s of one CPU, and the
# suite leaves an eighth of two CPUs idle (a 2-CPU host where a fresh-clone `.ci/run` took
# 12:23 and 14:23 one after the other). Its one line of output lands among the suite's dots.
test: lint
	@$(MAKE) --no-print-directory -j2 typecheck suite

# Not part of `make test`: builds synthetic catalogs (cached in benchmarks/.cache/), measures
# every backend against the stand-in GMS and rewrites benchmarks/RESULTS.md and results.png;
# then measures `catalog load` on a 200 MB metadata file (throughput and peak RSS), and how
# long `mlcopilot --help` and `mlcopilot checks` take to start, and what DataHub's assertions
# and incidents, learned freshness and classification, and 30 datasetProfiles a dataset add to
# a scan of 10,000 upstream entities; the downstream walk of a table feeding 1,000 models, the relay's store cost per outbox
# row, the watcher's event-to-incident and event-to-Slack latencies, the hourly full rescan
# shared by 1, 2 and 4 watchers, and the HTML report's size
# and render time (it prints its table for the RESULTS.md section by hand); last, every target
# of issue 27 side by side with its verdict (benchmarks/verdicts.py, top of RESULTS.md).
bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.load
	$(BIN)/python -m benchmarks.startup
	$(BIN)/python -m benchmarks.signals
	$(BIN)/python -m benchmarks.profile_drift --write
	$(BIN)/python -m benchmarks.freshness
	$(BIN)/python -m benchmarks.downstream
	$(BIN)/python -m benchmarks.relay
	$(BIN)/python -m benchmarks.watch
	$(BIN)/python -m benchmarks.rescan
	$(BIN)/python -m benchmarks.html_report
	$(BIN)/python -m benchmarks.verdicts

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
