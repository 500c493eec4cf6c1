"""Database growth per 1,000 runs of the bench shapes, and what pruning them costs.

Each shape of bench/workloads.py is simulated once with the options an API run has by default
(trace on, suggestions on); its result and trace are then stored as ``--runs`` runs of one
snapshot, exactly as a worker stores them (``runs.worker.store_output``). Growth is measured
on the database itself (SQLite: pages in use; PostgreSQL: ``pg_database_size``), so it counts
indexes and page overhead, which ``runs.storage`` (the figure the run page shows) does not.
Then ``runs.retention.prune_runs`` deletes them all, timed.

Run: .venv/bin/python bench/retention_bench.py [--shapes nodeclaims,upload,existing] [--runs N]
Uses a throwaway SQLite file unless DATABASE_URL is set (a PostgreSQL to measure there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SHAPES = ("nodeclaims", "upload", "existing")


def _setup(db_dir: str) -> None:
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{db_dir}/retention.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dra_web.settings")
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("DRA_WEB_BROKER_DIR", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _documents(shape: str) -> list[dict]:
    import workloads

    from bench.workloads import synthetic_cluster

    if shape == "existing":
        return workloads.existing_nodes()
    if shape == "nodeclaims":
        return workloads.new_nodeclaims()
    # "upload": the ~10 MB synthetic cluster of workloads.upload_yaml, as documents.
    nodes = int(10.0 * 1e6 / 8500)
    return synthetic_cluster(
        nodes=nodes, gpus_per_node=8, running_pods=nodes * 4, pending_pods=max(10, nodes // 6)
    )


def _database_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return int((pages - free) * cursor.fetchone()[0])


def _vacuum() -> None:
    """PostgreSQL's size counts dead rows until VACUUM; SQLite reuses freed pages itself."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def measure(shape: str, runs: int, owner) -> dict:
    from allocator.simulation import SimulationOptions, simulate
    from dra_web.runs import retention
    from dra_web.runs.models import Run
    from dra_web.runs.services import normalise_options
    from dra_web.runs.storage import run_storage
    from dra_web.runs.worker import store_output
    from dra_web.snapshots.services import create_snapshot, load_snapshot

    docs = _documents(shape)
    snapshot = create_snapshot(owner, [(f"{shape}.json", json.dumps(docs))], shape)
    options = normalise_options({"trace": True})  # what POST /api/runs/ stores by default
    started = time.perf_counter()
    output = simulate(load_snapshot(snapshot), SimulationOptions.from_json(options))
    simulated = time.perf_counter() - started
    _vacuum()
    before = _database_bytes()
    stores = []
    ids = []
    for _ in range(runs):
        run = Run.objects.create(snapshot=snapshot, owner=owner, options=options)
        t0 = time.perf_counter()
        store_output(run.pk, output.result, output.trace)
        stores.append(time.perf_counter() - t0)
        ids.append(run.pk)
    _vacuum()
    after = _database_bytes()
    per_run = (after - before) / runs
    shown = run_storage(Run.objects.get(pk=ids[0]))
    Run.objects.filter(pk__in=ids).update(finished_at=Run.objects.get(pk=ids[0]).finished_at)
    t0 = time.perf_counter()
    report = retention.prune_runs(1, now=Run.objects.get(pk=ids[0]).finished_at + timedelta(days=2))
    pruned = time.perf_counter() - t0
    _vacuum()
    return {
        "shape": shape,
        "pods": output.result["stats"]["pods"],
        "traceNodes": len(output.trace["nodes"]),
        "simulateSeconds": simulated,
        "storeSeconds": sum(stores) / len(stores),
        "perRunBytes": per_run,
        "per1000Bytes": per_run * 1000,
        "shownBytes": shown,
        "prunedRuns": report.runs,
        "pruneSecondsPerRun": pruned / max(report.runs, 1),
        "afterPruneBytes": _database_bytes() - before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="nodeclaims,upload,existing")
    parser.add_argument("--runs", type=int, default=10, help="runs stored per shape")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        raise SystemExit(f"unknown shape {unknown[0]!r} (shapes: {', '.join(SHAPES)})")
    with tempfile.TemporaryDirectory(prefix="dra-web-retention-") as tmp:
        _setup(tmp)
        from django.contrib.auth import get_user_model
        from django.db import connection

        owner, _ = get_user_model().objects.get_or_create(username="bench")
        print(f"database: {connection.vendor}; {args.runs} runs stored per shape")
        print(
            f"{'shape':<11} {'pods':>5} {'trace':>7} {'simulate':>9} {'store/run':>9} "
            f"{'growth/run':>11} {'per 1,000 runs':>15} {'run page says':>14} {'prune/run':>9}"
        )
        for shape in shapes:
            m = measure(shape, args.runs, owner)
            print(
                f"{m['shape']:<11} {m['pods']:>5} {m['traceNodes']:>7} "
                f"{m['simulateSeconds']:>8.1f}s {m['storeSeconds']:>8.2f}s "
                f"{_mb(m['perRunBytes']):>11} {_mb(m['per1000Bytes']):>15} "
                f"{_mb(m['shownBytes']['total']):>14} {m['pruneSecondsPerRun']:>8.2f}s"
            )
            s = m["shownBytes"]
            print(
                f"{'':<11} run page: result {_mb(s['result'])}, trace {_mb(s['trace'])}, "
                f"trace index {_mb(s['traceIndex'])}; pruned {m['prunedRuns']} runs, "
                f"{_mb(m['afterPruneBytes'])} left in use"
            )


if __name__ == "__main__":
    main()
