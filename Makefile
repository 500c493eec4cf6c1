# dra-web: `make run` starts the app with the demo snapshot, `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SYSTEM_PACKAGES := redis-server postgresql chromium chromium-driver
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench bytecode fuzz fuzz-cli fuzz-api lint format system-deps venv demo clean

# The editable install's "compat" mode puts the checkout on sys.path with a plain .pth line;
# the default mode imports a finder (pathlib, urllib, fnmatch...) in every Python process:
# 23 -> 11 ms per start. setuptools calls the mode transitional (its warning is silenced); a
# setuptools without it gets the default mode.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore $(PY) -m pip install --quiet -e '.[web,test]' \
	  --config-settings editable_mode=compat \
	  || $(PY) -m pip install --quiet -e '.[web,test]'
	$(MAKE) --no-print-directory bytecode
	touch $(STAMP)

# An editable install leaves the project's own modules uncompiled (pip compiles those of a
# regular install): under PYTHONDONTWRITEBYTECODE every process would compile them again, about
# 0.15 s of CPU per `python -m allocator`. Stale files are recompiled here and ignored by Python:
# `run`, `test` and `bench` ask for it, so a checkout newer than its .venv is compiled too.
bytecode:
	$(PY) -m compileall -q allocator dra_web >/dev/null

venv: $(STAMP)

# Servers for the tests are started by the tests themselves (127.0.0.1, free ports); this only
# makes sure the binaries exist on a fresh Debian machine.
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

demo: $(STAMP)
	$(PY) -m allocator simulate examples/demo-snapshot.yaml

# runserver plus a Celery worker (scripts/run-dev.sh); without REDIS_URL the broker is a
# directory (kombu's filesystem transport). The demo user is created here, for local use only.
run: export DRA_WEB_BROKER_DIR := $(if $(REDIS_URL),,$(or $(DRA_WEB_BROKER_DIR),$(CURDIR)/.celery-broker))
run: $(STAMP) bytecode
	$(PY) manage.py migrate --noinput
	$(PY) manage.py ensure_demo_user
	$(PY) manage.py load_demo
	-$(PY) -m allocator simulate examples/demo-snapshot.yaml
	@echo "log in with the user printed above"
	PY=$(PY) HOST=$(HOST) PORT=$(PORT) bash scripts/run-dev.sh

test: system-deps $(STAMP) bytecode
	$(PY) -m ruff check allocator dra_web tests bench
	$(PY) -m ruff format --check allocator dra_web tests bench
	bash scripts/run-tests.sh

# Long fuzzing runs (FUZZ_EXAMPLES cases each); `make test` runs a few hundred of each.
fuzz: fuzz-cli fuzz-api

fuzz-cli: $(STAMP)
	bash scripts/fuzz-cli.sh

fuzz-api: $(STAMP)
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-3000} $(PY) -m pytest -q -p no:cacheprovider tests/web/test_api_fuzz.py

bench: $(STAMP) bytecode
	$(PY) bench/cel_bench.py
	$(PY) bench/allocator_bench.py
	$(PY) bench/scheduling_bench.py
	$(PY) bench/web_bench.py
	$(PY) bench/tree_bench.py
	$(PY) bench/scale_bench.py
	$(PY) bench/retention_bench.py --shapes upload,nodeclaims --runs 3

lint: $(STAMP)
	$(PY) -m ruff check allocator dra_web tests bench

format: $(STAMP)
	$(PY) -m ruff format allocator dra_web tests bench

clean:
	rm -rf $(VENV) db.sqlite3 test-output .pytest_cache
