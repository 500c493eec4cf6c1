"""Failing pod x node pairs: 5,000 nodes x 8 GPUs, 1,000 pending pods, 5 % asking for a model
nobody has: the refusal funnel and the cached count stage at work. Whole process, as the CLI
runs it.

Run: .venv/bin/python bench/funnel_bench.py [--nodes N] [--pods P] [--no-funnel] [--profile]
Prints seconds (wall and the simulation's CPU time: the machine is shared), failing pod x
node pairs and pairs per CPU second.
"""

from __future__ import annotations

import argparse
import copy
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
from dra_web.snapshots.synthetic import synthetic_cluster  # noqa: E402


def build(nodes: int, pods: int, missing_every: int = 20) -> list[dict]:
    """The synthetic H100 cluster; every ``missing_every``-th pending pod asks for an A100."""
    docs = synthetic_cluster(nodes=nodes, gpus_per_node=8, running_pods=0, pending_pods=pods)
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    a100 = copy.deepcopy(template)
    a100["metadata"]["name"] = "a100"
    exactly = a100["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly["selectors"][0]["cel"]["expression"] = (
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"'
    )
    docs.append(a100)
    for d in docs:
        if d["kind"] == "Pod" and d["metadata"]["name"].startswith("train-"):
            index = int(d["metadata"]["name"].removeprefix("train-"))
            if index % missing_every == missing_every - 1:
                d["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "a100"
    return docs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--no-funnel", action="store_true", help="funnel refusal switched off")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    docs = build(args.nodes, args.pods)
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
