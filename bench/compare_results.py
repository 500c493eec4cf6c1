"""Decisions before/after a speed change: the result JSON of every snapshot, byte for byte.

Runs ``python -m allocator simulate FILE --json`` of a checkout (``--repo``, default this one)
on every snapshot under examples/ and tests/fixtures/ plus the bench workloads (bench/
workloads.py, small scales and (b) at full size), drops the timing fields (stats.seconds,
stats.suggestionSeconds) and writes one normalized document per snapshot into ``--out``.
``--against DIR`` then compares with an earlier ``--out``: any other difference is a changed
decision, placement, NodeClaim, error or explanation.

Run: .venv/bin/python bench/compare_results.py --out /tmp/before [--repo DIR]
     .venv/bin/python bench/compare_results.py --out /tmp/after --against /tmp/before
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMING = ("seconds", "suggestionSeconds")
# (workload, scale): generated once into --out/workloads.
WORKLOADS = (
    ("nodeclaims", 0.1),
    ("nodeclaims", 0.3),
    ("nodeclaims", 1.0),
    ("existing", 0.02),
    ("existing", 0.1),
    ("held", 0.05),
    ("busy", 0.25),
    ("nodeclaims-failing", 0.3),
    ("karpenter", 1.0),
    ("karpenter-failing", 1.0),
    ("karpenter-generic-failing", 1.0),
    ("karpenter-dra-failing", 0.3),
    ("karpenter-preferences", 0.25),
    ("anti-affinity-limits", 0.2),
)


def snapshots(out: Path) -> list[Path]:
    found = sorted(
        p
        for base in ("examples", "tests/fixtures")
        for p in (ROOT / base).rglob("*")
        if p.suffix in (".yaml", ".yml", ".json") and p.is_file()
    )
    generated = out / "workloads"
    generated.mkdir(parents=True, exist_ok=True)
    for kind, scale in WORKLOADS:
        path = generated / f"{kind}-{scale:g}.json"
        if not path.exists():
            gen = [sys.executable, str(ROOT / "bench" / "workloads.py"), kind]
            subprocess.run(
                [*gen, "--out", str(path), "--scale", str(scale)], check=True, capture_output=True
            )
        found.append(path)
    return found


def normalized(repo: Path, path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "allocator", "simulate", str(path), "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    doc = json.loads(proc.stdout)
    for key in TIMING:
        doc.get("stats", {}).pop(key, None)
    return json.dumps(doc, indent=1, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repo", type=Path, default=ROOT)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    paths = snapshots(args.out)

    def one(path: Path) -> tuple[str, str]:
        name = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name)
        return name.replace("/", "__"), normalized(args.repo.resolve(), path)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, paths))
    differing = []
    for name, text in results:
        (args.out / f"{name}.out").write_text(text)
        if args.against is not None:
            before = args.against / f"{name}.out"
            if not before.exists() or before.read_text() != text:
                differing.append(name)
    print(f"{len(results)} snapshots written to {args.out}")
    if args.against is not None:
        for name in differing:
            print(f"DIFFERS: {name}")
        print("identical" if not differing else f"{len(differing)} differ")
        sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
