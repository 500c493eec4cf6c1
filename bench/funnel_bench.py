"""Failing pod x node pairs: 5,000 nodes x 8 GPUs, 1,000 pending pods, 5 % asking for a model
nobody has: how fast failing pods are explained. Whole process, as the CLI runs it.

Run: .venv/bin/python bench/funnel_bench.py [--nodes N] [--pods P] [--no-funnel] [--profile]
Prints seconds (wall and the simulation's CPU time: the machine is shared), failing pod x
node pairs and pairs per CPU second.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allocator.scheduling.tuning import Tuning  # noqa: E402
from allocator.simulation import SimulationOptions, simulate  # noqa: E402
from allocator.snapshot import load_files  # noqa: E402
from bench.workloads import existing_nodes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--no-funnel", action="store_true", help="funnel refusal switched off")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    # The synthetic H100 cluster with its NodePool; every 20th pending pod asks for an A100.
    docs = existing_nodes(args.nodes, args.pods, node_pool=True)
    snapshot = load_files([("bench.json", json.dumps(docs))])
    loaded = time.perf_counter()
    options = SimulationOptions()
    tuning = Tuning(funnel_refusal=not args.no_funnel)
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    cpu = time.process_time()
    out = simulate(snapshot, options, tuning=tuning)
    cpu = time.process_time() - cpu
    if prof:
        prof.disable()
    simulated = time.perf_counter()
    text = json.dumps(out.result)
    done = time.perf_counter()
    stats = out.result["stats"]
    failed = [p for p in out.result["pods"] if not p["scheduled"]]
    # Every failed pod is refused by every node, once per pass (two passes here).
    pairs = len(failed) * args.nodes * 2
    sim = simulated - loaded
    print(
        f"nodes={args.nodes} pods={args.pods} scheduled={stats['scheduled']} "
        f"failed={stats['failed']} load={loaded - started:.2f}s simulate={sim:.2f}s "
        f"result-json={done - simulated:.2f}s ({len(text) / 1e6:.1f} MB) total={done - started:.2f}s"
    )
    print(
        f"simulate CPU {cpu:.2f}s; failing pod x node pairs: {pairs}, "
        f"{pairs / cpu:,.0f} pairs per CPU second (all the loop's work counted against them)"
    )
    if prof:
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "cumulative")).print_stats(30)


if __name__ == "__main__":
    main()
