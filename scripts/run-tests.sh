#!/usr/bin/env bash
# The whole suite, as `make test` runs it. Servers (Redis, Celery worker, gunicorn, PostgreSQL,
# the Django live server, Chromium) are started by the tests that need them, on 127.0.0.1, and
# stopped afterwards; tests/integration also re-runs tests/web against PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
