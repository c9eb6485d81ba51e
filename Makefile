# cputune — the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: run test install install-dev lint bench bench-scale bench-storage bench-advice clean

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt requirements.txt $(VENV)/.runtime
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

install: $(VENV)/.runtime
install-dev: $(VENV)/.dev

## Start web (http://127.0.0.1:8000), worker, beat and the lab on this machine. Ctrl-C stops everything.
run: install
	$(PY) -m cputune.launcher

## Install and run the whole test suite (SQLite + embedded broker unless DATABASE_URL / REDIS_URL are set).
test: install-dev
	$(PY) -m pytest

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	DEBUG=1 $(VENV)/bin/mypy .

## Run every benchmark, print a table, append to benchmarks/RESULTS.md, write benchmarks/results.json.
bench: install-dev
	$(PY) benchmarks/run_all.py

## End-to-end scale run: the simulated cluster collected by real workers into PostgreSQL (needs PostgreSQL and Redis;
## 15 min or more for the default 100 and 1,000 nodes on 2 cores). SCALE_NODES=100,1000,5000 adds the Kubernetes limit.
SCALE_NODES ?= 100,1000
## Apply the advisor's plan for every lab container to real cgroups and measure it, then every container busy at once
## against its shares floor (root, cgroup v1; a few minutes).
bench-advice: install-dev
	$(PY) benchmarks/run_all.py bench_advice

bench-scale: install-dev
	SCALE_NODES=$(SCALE_NODES) $(PY) benchmarks/run_all.py bench_scale

## Storage at scale: 7 days of one-minute samples for 100 nodes (6,000 containers, 60 million rows) in PostgreSQL —
## bytes per sample, rollups, retention and the pages on top (about 15 minutes). STORAGE_NODES=1000 needs ~120 GB.
STORAGE_NODES ?= 100
bench-storage: install-dev
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/cputune_storage} STORAGE_NODES=$(STORAGE_NODES) \
		$(PY) benchmarks/run_all.py bench_storage

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
