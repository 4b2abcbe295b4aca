# The two commands a new user runs: `make demo` and `make test`.
# Both create .venv if it is missing, install the project with its dev extra,
# check for Java 17+ (Spark needs it), then run the quickstart or the tests.
# `make test-fast` is the inner loop (no Ray, Spark or S3 server); `make lint` is ruff + mypy.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FAST_TIER := not ray and not spark and not s3
FAST_LOG := .fast-tier.log

.PHONY: demo demo-features test test-fast lint bench bench-controller bench-transactions bench-large-events bench-checkpoints bench-retention bench-readers bench-pipeline-writes bench-spark-bridge bench-ray-data bench-idle-container bench-long-life bench-front-door bench-watermarks chaos simulate clean check-java venv

demo: venv check-java
	$(PY) examples/quickstart.py
	$(PY) examples/feature_ingestion.py

demo-features: venv check-java
	$(PY) examples/feature_ingestion.py

# The whole suite in two runs side by side: every test that needs Ray, Spark or an S3 server in
# one process (it shares one Ray, one Spark and one S3 server), and beside it, at the lowest CPU
# priority so that it only takes what the first leaves idle, the fast tier on a worker process
# per core (pytest-xdist), its output kept in $(FAST_LOG) and printed at the end. Together they
# are every test; the target fails if either run does.
test: lint check-java
	@echo "fast tier: running beside the rest at low priority (nice 19), output in $(FAST_LOG)"
	@PRAVEGA_TEST_TIER=fast nice -n 19 $(PY) -m pytest tests -m "$(FAST_TIER)" -n auto \
	    > $(FAST_LOG) 2>&1 & fast=$$!; trap 'kill $$fast 2>/dev/null' INT TERM; \
	$(PY) -m pytest tests -m "not ($(FAST_TIER))" --durations=15; cluster=$$?; \
	wait $$fast; fast_rc=$$?; \
	echo "=== fast tier, from $(FAST_LOG) ==="; cat $(FAST_LOG); \
	echo "tests needing Ray, Spark or S3: exit $$cluster; fast tier: exit $$fast_rc"; \
	test $$cluster -eq 0 && test $$fast_rc -eq 0

# The inner loop: ruff, mypy and the fast tier alone.
test-fast: lint
	PRAVEGA_TEST_TIER=fast $(PY) -m pytest tests -m "$(FAST_TIER)" -n auto

lint: venv
	$(PY) -m ruff check pravega_ray actors tests examples benchmarks chaos sim
	$(PY) -m mypy

# The chaos suite (chaos/run.py, docs/chaos.md): MINUTES of load on a 3-node local Ray with
# both tiers on SeaweedFS behind a fault-injecting proxy, every kind of actor killed on a
# seeded schedule (SEED=n replays one), then every invariant checked. Not part of `make test`
# (its 90 s smoke run is). Exits non-zero when an invariant broke.
MINUTES ?= 10
chaos: venv
	$(PY) -m chaos.run --minutes $(MINUTES) $(if $(SEED),--seed $(SEED),)

# The deterministic simulation of the data path (sim/, docs/chaos.md): SEEDS seeds from a random
# start (printed first); exits non-zero with the first failing seed, its trace and the command
# that replays it. `make test` runs a fixed set of seeds (tests/unit/sim).
SEEDS ?= 1000
simulate: venv
	$(PY) -m sim --seeds $(SEEDS)

bench: venv
	$(PY) -m benchmarks.append_throughput

bench-controller: venv
	$(PY) -m benchmarks.controller

bench-transactions: venv
	$(PY) -m benchmarks.transactions

bench-large-events: venv
	$(PY) -m benchmarks.large_events

bench-checkpoints: venv
	$(PY) -m benchmarks.checkpoints --ray

bench-retention: venv
	$(PY) -m benchmarks.retention

bench-readers: venv
	$(PY) -m benchmarks.readers

bench-pipeline-writes: venv
	RAY_ADDRESS=local $(PY) -m benchmarks.pipeline_writes

bench-spark-bridge: venv check-java
	RAY_ADDRESS=local $(PY) -m benchmarks.spark_bridge

bench-ray-data: venv
	RAY_ADDRESS=local $(PY) -m benchmarks.ray_data_read

bench-idle-container: venv
	$(PY) -m benchmarks.idle_container

bench-long-life: venv
	$(PY) -m benchmarks.long_life
	$(PY) -m benchmarks.long_life_controller

bench-front-door: venv
	RAY_ADDRESS=local $(PY) -m benchmarks.front_door

bench-watermarks: venv
	$(PY) -m benchmarks.watermarks

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

check-java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "error: Java 17 or newer is required (Spark runs on the JVM)."; \
	  echo "       On Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless"; exit 1; }
	@v=$$(java -version 2>&1 | awk -F'"' '/version/ {print $$2}' | cut -d. -f1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "error: Java 17 or newer is required, found: $$(java -version 2>&1 | head -1)"; \
	  echo "       On Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless"; exit 1; fi

clean:
	rm -rf $(VENV) .venv-pravega-client .venv-pravega-client.lock .pravega-data .pravega-data-features .pytest_cache build *.egg-info $(FAST_LOG)
