#!/usr/bin/env bash
# `make run`: Django's runserver and a Celery worker beside it, stopped together (Ctrl-C, or
# either one exiting). Without REDIS_URL the broker is kombu's filesystem transport in
# DRA_WEB_BROKER_DIR (no server needed), so runs are queued and executed as in production:
# 202 queued, live progress, cancellation, stale runs reaped.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
if [ -z "${REDIS_URL:-}" ]; then
  export DRA_WEB_BROKER_DIR=${DRA_WEB_BROKER_DIR:-$PWD/.celery-broker}
fi

worker=""
server=""
stop() {
  trap - INT TERM EXIT
  for pid in $server $worker; do kill -TERM "$pid" 2>/dev/null; done
  # Celery finishes its current task on TERM; a second signal after a grace period ends it.
  for _ in $(seq 50); do
    alive=""
    for pid in $server $worker; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.2
  done
  for pid in $server $worker; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop INT TERM EXIT

# SQLite takes one writer at a time: one pool process is plenty for a laptop. Beat runs
# embedded (-B) for the periodic tasks of settings.CELERY_BEAT_SCHEDULE, such as the reaper of
# runs whose worker was lost; its schedule file lives beside the broker's files.
beat_dir=${DRA_WEB_BROKER_DIR:-$PWD/.celery-broker}
mkdir -p "$beat_dir"
"$PY" -m celery -A dra_web worker --loglevel="${CELERY_LOG_LEVEL:-INFO}" \
  --concurrency="${CELERY_CONCURRENCY:-1}" --without-gossip --without-mingle \
  -B --schedule="$beat_dir/celerybeat-schedule" &
worker=$!
"$PY" manage.py runserver --noreload "$HOST:$PORT" &
server=$!
echo "dra-web on http://$HOST:$PORT/ (worker pid $worker, server pid $server; Ctrl-C stops both)"
# Whichever exits first ends the other.
wait -n "$worker" "$server"
