"""Issue 11's workloads, whole process as the CLI runs them, beside the anchors.

(a) ``existing``: 5,000 existing nodes x 8 GPUs, 1,000 pending pods, 5 % asking for a model
    nobody has (target under 20 s, goal 5 s);
(b) ``nodeclaims``: 100 nodes, 1,000 pods needing about 170 new NodeClaims from 100 instance
    types (target under 6 s, goal 1 s);
(c) ``upload``: a 10 MB YAML snapshot, loaded and simulated (the upload's parse is its load).

For each: the snapshot is generated with fixed seeds (bench/workloads.py), then
``python -m allocator simulate FILE`` runs in a child process: its wall time and peak
RSS are the whole-process figures. A second child times the phases (load, simulate, explanation
and suggestions with the result document) with the same library calls the CLI makes.

Anchors: Karpenter's Go scheduling benchmark places 1,000 pods on 200 new nodes in 0.89 s
(without DRA); kube-scheduler's scheduler_perf runs at a few hundred pods/s with DRA.

For (a) it also prints the failing pod x node pairs the run weighed (failing pods x existing
nodes x the passes that attempted them; retries skipped as unchanged do not count) per second
of the whole process and of the simulation phase.

Run: .venv/bin/python bench/scale_bench.py [existing nodeclaims upload] [--scale F] [--no-phases]
     [--repo DIR]  (another checkout's allocator, e.g. a "before" worktree)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = {"existing": (20.0, 5.0), "nodeclaims": (6.0, 1.0), "upload": (4.0, None)}
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

    tune_gc = getattr(allocator.cli, "tune_gc", None)
    if tune_gc is not None:  # as ``python -m allocator`` does in this checkout
        tune_gc()
    started = time.perf_counter()
    from allocator.snapshot import load_paths

    snapshot = load_paths([path])
    loaded = time.perf_counter()
    from allocator.result import build_result
    from allocator.scheduling.setup import build_run
    from allocator.simulation import SimulationOptions
    from allocator.trace import NULL_TRACE

    options = SimulationOptions()
    try:  # this tree: the run's pipeline from its gates
        from allocator.pipeline import build_pipeline

        run = build_run(snapshot, options, NULL_TRACE, build_pipeline(options.gates))
    except ImportError:  # an older tree (--repo): gates set process-wide
        from allocator.features.bindingconditions import activate_gates

        activate_gates(options.gates)
        run = build_run(snapshot, options, NULL_TRACE)
    solve = getattr(run.scheduler, "solve", None) or run.scheduler.run  # an older tree: run
    outcomes = solve(run.pods.pending, run.pod_claims)
    simulated = time.perf_counter()
    # Failing pod x node pairs actually considered: every pass that attempted (or replayed) a
    # pod that failed in the end weighed it against every existing node; skipped retries not.
    nodes = len(run.scheduler.existing)
    pairs = sum(o.attempts for o in outcomes if not o.scheduled) * nodes
    from allocator.explanation.suggestions import suggest

    suggestions = suggest(snapshot, run, outcomes)
    result = build_result(snapshot, options, run, outcomes, simulated - loaded, suggestions)
    text = json.dumps(result)
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "load": loaded - started,
                "simulate": simulated - loaded,
                "explain": done - simulated,
                "nodeClaims": len(result["nodeClaims"]),
                "failingPairs": pairs,
                "resultMB": len(text) / 1e6,
            }
        )
    )


def bench(kind: str, scale: float, with_phases: bool, directory: str, repo: Path) -> dict:
    suffix = ".yaml" if kind == "upload" else ".json"
    path = os.path.join(directory, f"{kind}{suffix}")
    py = sys.executable
    # Generated in a child too: a fork of a big parent would count in the child's peak RSS.
    gen = [py, str(ROOT / "bench" / "workloads.py"), kind, "--out", path, "--scale", str(scale)]
    _child(gen)
    size = os.path.getsize(path)
    # The human summary (not --json): a big result parsed here would grow this process, and
    # a child forked from a big process reports its peak RSS.
    wall, cpu, rss, out = _child([py, "-m", "allocator", "simulate", path], repo)
    first = out.decode().splitlines()[0]  # "Pods: N pending, N scheduled, N failed  (...)"
    found = re.match(r"Pods: (\d+) pending, (\d+) scheduled, (\d+) failed", first)
    if found is None:
        raise SystemExit(f"unexpected summary: {first}")
    pods, scheduled, failed = (int(g) for g in found.groups())
    row = {
        "workload": kind,
        "MB": size / 1e6,
        "pods": pods,
        "scheduled": scheduled,
        "failed": failed,
        "nodeClaims": "?",
        "seconds": wall,
        "cpuSeconds": cpu,
        "podsPerSecond": pods / wall if wall else 0.0,
        "peakRSSMB": rss / 1e6,
    }
    if with_phases:
        _, _, _, text = _child([py, str(Path(__file__).resolve()), "--phases", path], repo)
        row.update(json.loads(text))
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="*", default=["existing", "nodeclaims", "upload"])
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
    print(f"anchors: {KARPENTER_ANCHOR}; {KUBE_SCHEDULER_ANCHOR}")
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as directory:
        for kind in args.workloads:
            row = bench(kind, args.scale, not args.no_phases, directory, args.repo.resolve())
            target, goal = TARGETS[kind]
            verdict = "ok" if row["seconds"] < target * max(args.scale, 1.0) else "ABOVE TARGET"
            line = (
                f"{kind:10s} {row['MB']:5.1f} MB pods={row['pods']} scheduled={row['scheduled']} "
                f"failed={row['failed']} nodeClaims={row['nodeClaims']} "
                f"whole-process={row['seconds']:.2f}s (CPU {row['cpuSeconds']:.2f}s) "
                f"pods/s={row['podsPerSecond']:.0f} "
                f"peak RSS={row['peakRSSMB']:.0f} MB"
            )
            if row.get("failingPairs"):
                pairs = row["failingPairs"]
                line += (
                    f" | failing pod x node pairs={pairs}: {pairs / row['seconds']:.0f}/s whole "
                    f"process, {pairs / row['simulate']:.0f}/s of the simulation"
                )
            if "load" in row:
                line += (
                    f" | phases: load={row['load']:.2f}s simulate={row['simulate']:.2f}s "
                    f"explanation+suggestions+result={row['explain']:.2f}s"
                )
            line += f" (target {target:g}s" + (f", goal {goal:g}s" if goal else "")
            print(f"{line}: {verdict})", flush=True)


if __name__ == "__main__":
    main()
