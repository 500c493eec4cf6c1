#!/usr/bin/env bash
# The whole suite, as `make test` runs it. Servers (Redis, Celery worker, PostgreSQL, the Django
# live server) are started by the tests that need them, on 127.0.0.1, and stopped afterwards.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
mkdir -p test-output
status=0

# 1. Everything on SQLite: allocator, scheduling, web, pages, integration, browser.
$PY -m pytest -q -p no:cacheprovider "$@" || status=$?

# 2. The database-facing tests again on a real PostgreSQL that the fixture starts.
DRA_WEB_TEST_POSTGRES=1 $PY -m pytest -q -p no:cacheprovider tests/web tests/pages -m "not browser" || status=$?

exit $status
