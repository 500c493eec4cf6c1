"""The scale workloads (bench/workloads.py), whole process as the CLI runs them, beside the
anchors.

(a) ``existing``: 5,000 existing nodes x 8 GPUs, 1,000 pending pods, 5 % asking for a model
    nobody has (target under 20 s, goal 5 s);
    ``existing-yaml``: the same as an 18.7 MB YAML stream (its load phase: a 16 MB snapshot
    loaded in under 1 s);
    ``held``: 1,000 nodes whose GPUs three different claims hold each, 1,000 pods, 5 % asking
    for a whole node (so every node refuses them with its own holders);
``busy``: 2,000 CPU nodes, 1,900 of them full, 1,000 pending pods (5 % too big for any):
    every pod passes the full nodes first (words of a refusal built only when read);
    ``busy-selector``: the same with room everywhere but a node selector only 100 nodes meet;
(b) ``nodeclaims``: 100 nodes, 1,000 pods needing about 170 new NodeClaims from 100 instance
    types (target under 6 s, goal 1 s); ``nodeclaims-failing``: the same with 5 % of the pods
    asking for 16 GPUs, more than any instance type has (target 3 s, goal 1 s);
(c) ``upload``: a 10 MB YAML snapshot, loaded and simulated (the upload's parse is its load);
(d) ``karpenter*``: Karpenter's own scheduling benchmark (its 400 fake instance types and its
    diverse pod mix: 1,000 pods onto about 200 new nodes), generic pods only, with DRA claims,
    with pods that cannot be placed. Karpenter's Go ``Solve`` on the same snapshot is the
    target (``GO_SOLVE_SECONDS``).
    ``karpenter-preferences``: its preference benchmark (makePreferencePods, 4,000 nginx pods
    whose zone anti-affinity preference must be relaxed, one new node each: quadratic in Go
    too; it took 220 s and 14 GB here before NodeClaims taken by a hostname anti-affinity were
    passed over).
(e) ``anti-affinity-limits``: a Deployment of 5,000 replicas that must not share a hostname,
    past its NodePool's cpu limit (1,000 NodeClaims): 4,000 replicas fail on 1,000 NodeClaims
    and the NodePool, one cause (15.7 s and 2.2 GB before replicas shared their suggestions'
    object lists).

For each: the snapshot is generated with fixed seeds (bench/workloads.py), then
``python -m allocator simulate FILE --json`` runs in a child process: its wall time and peak
RSS are the whole-process figures, its output the result document (bytes per failed pod are
the result's size over the failed pods). A second child times the phases (the imports, load,
setup, solve, explanation and suggestions with the result document written) with the same
library calls the CLI makes; "Solve alone" compares its solve with Karpenter's, both timed in
a process that has its code loaded and its scheduler set up.

Anchors: Karpenter's Go scheduling benchmark places 1,000 pods on 200 new nodes in 0.89 s
(its published figure, without DRA); kube-scheduler's scheduler_perf runs at a few hundred
pods/s with DRA. ``GO_SOLVE_SECONDS``: Karpenter's own ``Solve`` (Go 1.27, DRA on) on each
Karpenter shape's snapshot, measured on the 2-core machine the README's table comes from.

For (a) it also prints the failing pod x node pairs the run weighed (failing pods x existing
nodes x the passes that attempted them; retries skipped as unchanged do not count) per second
of the whole process and of the simulation phase.

Run: .venv/bin/python bench/scale_bench.py [WORKLOAD ...] [--scale F] [--no-phases]
     [--repo DIR]  (another checkout's allocator, e.g. a "before" worktree)
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.workloads import KARPENTER_SHAPES, KINDS, suffix  # noqa: E402

# Karpenter's Go Solve on the same snapshots, seconds (the README's table: best of its runs),
# by (workload, --scale). karpenter-dra-failing: Karpenter's search timed out and Solve
# stopped with 896 pods untried.
GO_SOLVE_SECONDS = {
    ("karpenter", 1.0): 1.88,
    ("karpenter-failing", 1.0): 2.97,
    ("karpenter-generic", 1.0): 0.26,
    ("karpenter-generic-failing", 1.0): 0.28,
    ("karpenter-dra", 1.0): 23.3,
    ("karpenter-dra-failing", 1.0): 39.2,
    ("karpenter-preferences", 1.0): 52.0,
    ("karpenter", 5.0): 11.1,
    ("karpenter-failing", 5.0): 39.2,
}
# workload: (target, goal) in seconds of the whole process
TARGETS = {
    "existing": (20.0, 5.0),
    "existing-yaml": (20.0, 5.0),
    "held": (20.0, 5.0),
    "busy": (5.0, 1.0),
    "busy-selector": (5.0, 1.0),
    "nodeclaims": (6.0, 1.0),
    "nodeclaims-failing": (3.0, 1.0),
    "upload": (4.0, 1.0),
    **{kind: (GO_SOLVE_SECONDS[kind, 1.0], None) for kind in KARPENTER_SHAPES},
    "karpenter-preferences": (10.0, None),
    "anti-affinity-limits": (10.0, 5.0),
}
KARPENTER_ANCHOR = "Karpenter Go benchmark: 1,000 pods on 200 new nodes in 0.89 s (no DRA)"
KUBE_SCHEDULER_ANCHOR = "kube-scheduler scheduler_perf (DRA): a few hundred pods/s"


def _child(args: list[str], cwd: Path = ROOT) -> tuple[float, float, int, bytes]:
    """Run a child; its wall time, CPU time (user + system), peak RSS (bytes) and output."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read() if proc.stderr else b""
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {err.decode()[-2000:]}")
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return seconds, cpu, usage.ru_maxrss * 1024, out.read()


def phases(path: str) -> None:
    """Child: the CLI's own calls, timed per phase; prints one JSON line."""
    sys.path.insert(0, os.getcwd())  # the checkout measured (--repo)
    import allocator.cli

    try:  # as ``python -m allocator`` does in this checkout
        from allocator.collector import tune_for_one_run as tune_gc
    except ImportError:  # an older checkout (--repo)
        tune_gc = getattr(allocator.cli, "tune_gc", None)
    if tune_gc is not None:
        tune_gc()
    # The modules a run imports, first: Karpenter's Solve is timed in a process that has
    # them, so the phases below compare like with like (the whole process counts them).
    started = time.perf_counter()
    from allocator.result import build_result
    from allocator.scheduling.setup import build_run
    from allocator.simulation import SimulationOptions
    from allocator.snapshot import load_paths
    from allocator.suggestions import suggest
    from allocator.trace import NULL_TRACE

    imported = time.perf_counter()
    # As the command line loads (a long YAML stream read by a forked reader beside the build).
    if "read_beside" in inspect.signature(load_paths).parameters:  # this tree
        snapshot = load_paths([path], read_beside=True)
    else:
        snapshot = load_paths([path])
    loaded = time.perf_counter()
    options = SimulationOptions()
    try:  # the run's pipeline from its gates
        from allocator.pipeline import build_pipeline

        pipeline = build_pipeline(options.gates)
        if "timeout" in inspect.signature(build_run).parameters:  # this tree
            run = build_run(
                snapshot, pipeline, NULL_TRACE, timeout=options.timeout, disrupt=options.disrupt
            )
        else:  # an older tree (--repo): build_run(snapshot, options, trace, pipeline)
            run = build_run(snapshot, options, NULL_TRACE, pipeline)
    except ImportError:  # an older tree still (--repo): gates set process-wide
        from allocator.features.bindingconditions import activate_gates

        activate_gates(options.gates)
        run = build_run(snapshot, options, NULL_TRACE)
    solve = getattr(run.scheduler, "solve", None) or run.scheduler.run  # an older tree: run
    set_up = time.perf_counter()
    outcomes = solve(run.pods.pending, run.pod_claims)
    simulated = time.perf_counter()
    # Failing pod x node pairs actually considered: every pass that attempted (or replayed) a
    # pod that failed in the end weighed it against every existing node; skipped retries not.
    nodes = len(run.scheduler.existing)
    pairs = sum(o.attempts for o in outcomes if not o.scheduled) * nodes
    suggestions = suggest(snapshot, run, outcomes)
    suggested = time.perf_counter()
    result = build_result(snapshot, options, run, outcomes, simulated - loaded, suggestions)
    try:  # the CLI's own writer
        from allocator.jsonwrite import to_text

        text = to_text(result, indent=True)
    except ImportError:  # an older tree (--repo)
        text = json.dumps(result, indent=2)
    done = time.perf_counter()
    # The yardstick: every failed pod's entry (compact JSON) under 20 kB.
    failed_entries = [len(json.dumps(p)) for p in result["pods"] if not p["scheduled"]]
    print(
        json.dumps(
            {
                "imports": imported - started,
                "load": loaded - imported,
                "setup": set_up - loaded,
                "simulate": simulated - set_up,
                "explain": done - simulated,
                "suggest": suggested - simulated,
                "write": done - suggested,
                "maxFailedEntryKB": max(failed_entries, default=0) / 1e3,
                "nodeClaims": len(result["nodeClaims"]),
                "failingPairs": pairs,
                "resultMB": len(text) / 1e6,
            }
        )
    )


def bench(kind: str, scale: float, with_phases: bool, directory: str, repo: Path) -> dict:
    path = os.path.join(directory, f"{kind}{suffix(kind)}")
    py = sys.executable
    # Generated in a child too: a fork of a big parent would count in the child's peak RSS.
    gen = [py, str(ROOT / "bench" / "workloads.py"), kind, "--out", path, "--scale", str(scale)]
    _child(gen)
    size = os.path.getsize(path)
    # The result document goes to a file the child writes (not parsed here: a big parent
    # would make the next child's figures its own).
    result_path = os.path.join(directory, f"{kind}.result.json")
    wall, cpu, rss, _ = _child(
        ["sh", "-c", 'exec "$0" -m allocator simulate "$1" --json > "$2"', py, path, result_path],
        repo,
    )
    stats = _stats(result_path)
    result_bytes = os.path.getsize(result_path)
    row = {
        "workload": kind,
        "MB": size / 1e6,
        "pods": stats["pods"],
        "scheduled": stats["scheduled"],
        "failed": stats["failed"],
        "nodeClaims": stats.get("nodeClaims", "?"),
        "seconds": wall,
        "cpuSeconds": cpu,
        "podsPerSecond": stats["pods"] / wall if wall else 0.0,
        "peakRSSMB": rss / 1e6,
        "resultMB": result_bytes / 1e6,
        "bytesPerFailedPod": result_bytes / stats["failed"] if stats["failed"] else None,
    }
    if with_phases:
        _, _, _, text = _child([py, str(Path(__file__).resolve()), "--phases", path], repo)
        row.update(json.loads(text))
    return row


def _stats(result_path: str) -> dict:
    """The result's ``stats`` (a flat object after the pods and NodeClaims), read without
    parsing the whole document."""
    with open(result_path, "rb") as fh:
        data = fh.read()
    start = data.rfind(b'"stats": {')
    if start < 0:
        raise SystemExit(f"no stats in the result: {data[:300]!r}")
    start = data.index(b"{", start)
    return json.loads(data[start : data.index(b"}", start) + 1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="*", default=list(KINDS), help=", ".join(KINDS))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--no-phases", action="store_true")
    parser.add_argument("--phases", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument(
        "--repo", type=Path, default=ROOT, help="run another checkout's allocator (before/after)"
    )
    args = parser.parse_args()
    if args.phases:
        phases(args.phases)
        return
    unknown = [kind for kind in args.workloads if kind not in KINDS]
    if unknown:
        parser.error(f"unknown workloads {', '.join(unknown)} (choose from {', '.join(KINDS)})")
    print(f"anchors: {KARPENTER_ANCHOR}; {KUBE_SCHEDULER_ANCHOR}")
    repo = args.repo.resolve()
    # Compiled alike: a fresh "before" worktree has no bytecode, and under
    # PYTHONDONTWRITEBYTECODE each of its processes would compile every module again (some
    # 0.2 s of CPU) where this checkout's were compiled by `make bytecode`.
    _child([sys.executable, "-m", "compileall", "-q", "allocator"], repo)
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as directory:
        for kind in args.workloads:
            row = bench(kind, args.scale, not args.no_phases, directory, repo)
            target, goal = TARGETS[kind]
            go = GO_SOLVE_SECONDS.get((kind, args.scale))
            target = go if go is not None else target * max(args.scale, 1.0)
            verdict = "ok" if row["seconds"] < target else "ABOVE TARGET"
            line = (
                f"{kind:25s} {row['MB']:5.1f} MB pods={row['pods']} scheduled={row['scheduled']} "
                f"failed={row['failed']} nodeClaims={row['nodeClaims']} "
                f"whole-process={row['seconds']:.2f}s (CPU {row['cpuSeconds']:.2f}s) "
                f"pods/s={row['podsPerSecond']:.0f} "
                f"peak RSS={row['peakRSSMB']:.0f} MB result={row['resultMB']:.1f} MB"
            )
            if row["bytesPerFailedPod"] is not None:
                line += f" ({row['bytesPerFailedPod'] / 1e3:.0f} kB per failed pod)"
            if go is not None:
                line += f" | {row['seconds'] / go:.2f}x Karpenter's Go Solve ({go:g}s)"
                if "simulate" in row:
                    line += f" (Solve alone {row['simulate'] / go:.2f}x)"
            if row.get("failingPairs"):
                pairs = row["failingPairs"]
                line += (
                    f" | failing pod x node pairs={pairs}: {pairs / row['seconds']:.0f}/s whole "
                    f"process, {pairs / row['simulate']:.0f}/s of the simulation"
                )
            if "load" in row:
                line += (
                    f" | phases: imports={row['imports']:.2f}s load={row['load']:.2f}s "
                    f"setup={row['setup']:.2f}s solve={row['simulate']:.2f}s "
                    f"explanation+suggestions+result={row['explain']:.2f}s "
                    f"(suggestions {row['suggest']:.2f}s, result {row['write']:.2f}s)"
                )
                if row["maxFailedEntryKB"]:
                    line += f" largest failed entry={row['maxFailedEntryKB']:.1f} kB"
            line += f" (target {target:g}s" + (f", goal {goal:g}s" if goal else "")
            print(f"{line}: {verdict})", flush=True)


if __name__ == "__main__":
    main()
