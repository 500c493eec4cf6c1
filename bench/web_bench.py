"""Web service figures: upload+parse of a generated ~20 MB snapshot, and the API latency of a
run page's data with a 100,000-node trace. Run: .venv/bin/python bench/web_bench.py

Uses a throwaway SQLite file (or DATABASE_URL if set) and Django's test client, so the
numbers are the service's own work without network or browser.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _setup(db_dir: str) -> None:
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{db_dir}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dra_web.settings")
    os.environ.pop("REDIS_URL", None)
    os.environ["DRA_WEB_RUN_HEARTBEAT_SECONDS"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _timed(fn, repeat: int) -> tuple[float, float, object]:
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    return statistics.median(times), p95, value


def _kubectl_style(docs: list[dict]) -> str:
    """The documents as kubectl (go-yaml) writes them: double quotes where a string needs
    quoting, pods' env values such as "no" and "on" (YAML 1.1 booleans when plain) quoted."""
    import yaml

    class GoYamlQuoting(yaml.SafeDumper):
        def choose_scalar_style(self):  # type: ignore[no-untyped-def]
            style = super().choose_scalar_style()
            return '"' if style == "'" else style

    for doc in docs:
        if doc.get("kind") == "Pod":
            for container in doc["spec"].get("containers", []):
                container["env"] = [
                    {"name": "NCCL_DEBUG", "value": "INFO"},
                    {"name": "ENABLE_PROFILING", "value": "no"},
                    {"name": "USE_TF32", "value": "on"},
                ]
    return yaml.dump_all(docs, Dumper=GoYamlQuoting, sort_keys=True, width=1 << 30)


def synthetic_trace(target_nodes: int) -> dict:
    """A DFS trace shaped like the allocator's: pod > target > instanceType > claim >
    request > device, most devices failing a selector, some pruned, one allocated."""
    from allocator.trace import Trace
    from tests.pages.builders import gpu_try

    trace = Trace()
    add = trace.add
    pod_index = 0
    while len(trace.nodes) < target_nodes:
        pod = add(None, "pod", f"ml-training/train-{pod_index}", "failed", "selector")
        for t in range(4):
            node = f"ip-10-0-{t}-{pod_index % 250}.us-west-2.compute.internal"
            target = add(pod, "target", f"node/{node}", "failed", "selector")
            it = add(target, "instanceType", "p5.48xlarge", "failed", "selector")
            claim = add(it, "claim", f"ml-training/train-{pod_index}-gpu", "failed", "selector")
            request = add(claim, "request", "gpu", "failed", "selector")
            for g in range(8):
                status, reason = ("pruned", "capacity") if g % 3 == 0 else ("failed", "selector")
                gpu_try(trace, request, node, f"gpu-{g}", status, reason)
            if len(trace.nodes) >= target_nodes:
                break
        pod_index += 1
    return {**trace.to_json(), "nodes": trace.nodes[:target_nodes]}


# Runs where pods fail, as the issue measured them: 100 pods fail on 1,000 nodes, on nodes
# whose devices many claims hold, and on new NodeClaims.
PAGE_SHAPES = {
    "existing": lambda w: w.existing_nodes(1000, 1000, missing_every=10),
    "held": lambda w: w.held_devices(1000, 1000, missing_every=10),
    "nodeclaims-failing": lambda w: w.new_nodeclaims(100, 1000, failing_every=10),
    # The same failures on 1,000 nodes with a NodePool and its catalog: each is also refused
    # by the NodeClaims it could have had.
    "existing-pool": lambda w: w.existing_nodes(1000, 1000, missing_every=10, node_pool=True),
    # Karpenter's benchmark with DRA claims: 200 NodeClaims of 400 instance types, each claim's
    # devices listed per instance type (a result of some 50 MB).
    "karpenter-dra-failing": lambda w: w.karpenter_benchmark(
        1000, topology=True, dra=True, failing_every=10
    ),
}


def _first_view_in_new_process(url: str) -> float:
    """The first request of ``url`` by a process that has served nothing yet (a server just
    started: the URL configuration's imports and the templates' compilation included)."""
    out = subprocess.run(
        [sys.executable, __file__, "--first-view", url],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.split()[-1])


def _first_view(url: str) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="pages"))
    client.handler.load_middleware()  # what a WSGI server does when it starts, not per request
    from dra_web.warmup import warm_up

    warm_up()  # and what dra_web.wsgi does then
    start = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, (url, response.status_code)
    print(f"{elapsed:.4f}")


def failing_run_pages(shapes: list[str], repeat: int) -> None:
    """Each shape simulated as the worker runs it, stored, and its run page served: the
    page's HTML bytes, its first request by a new server process, the first (cold) request
    of this one and the median of the warm ones."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from bench import workloads
    from dra_web.runs.models import Run
    from dra_web.runs.worker import execute_run
    from dra_web.snapshots.services import create_snapshot

    user = get_user_model().objects.create_user("pages")
    client = Client()
    client.force_login(user)
    client.get("/")  # the server's own warm-up (imports), not the page's
    for shape in shapes:
        docs = PAGE_SHAPES[shape](workloads)
        snapshot = create_snapshot(user, [(f"{shape}.json", workloads.to_json(docs))], shape)
        run = Run.objects.create(snapshot=snapshot, owner=user, options={"trace": False})
        start = time.perf_counter()
        execute_run(run.pk)
        simulated = time.perf_counter() - start
        run.refresh_from_db()
        assert run.status == Run.SUCCEEDED, (shape, run.status, run.error)
        stats = run.result.get("stats") or {}
        url = f"/runs/{run.pk}/"
        fresh = _first_view_in_new_process(url)
        start = time.perf_counter()
        response = client.get(url)
        cold = time.perf_counter() - start
        assert response.status_code == 200, (url, response.status_code)
        warm, _, response = _timed(lambda u=url: client.get(u), repeat)
        failed = next(p["pod"] for p in run.result["pods"] if not p.get("scheduled"))
        namespace, _, name = failed.partition("/")
        part = f"/runs/{run.pk}/pods/{namespace}/{name}/explanation/"
        part_time, _, part_response = _timed(lambda u=part: client.get(u), repeat)
        assert part_response.status_code == 200, (part, part_response.status_code)
        print(
            f"run page of {shape}: {stats.get('failed')} of {stats.get('pods')} pods failed "
            f"(simulated and stored in {simulated:.1f} s): "
            f"{len(response.content) / 1e6:.2f} MB HTML, {fresh:.2f} s first in a new "
            f"process, {cold:.2f} s first in this one, "
            f"{warm:.2f} s warm (target 0.5 s, 1 MB); a failed pod's explanation (loaded "
            f"when shown): {len(part_response.content) / 1e3:.0f} kB, {part_time:.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=float, default=20.0)
    parser.add_argument("--trace-nodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--upload-repeat", type=int, default=5, help="stored uploads of each ~10 MB YAML shape"
    )
    parser.add_argument(
        "--only-upload", action="store_true", help="the uploads only, not the run page's data"
    )
    parser.add_argument(
        "--only-pages",
        default="",
        help="only the run pages of these failing shapes (comma-separated: "
        + ", ".join(PAGE_SHAPES)
        + ")",
    )
    parser.add_argument("--first-view", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_view:  # the child of _first_view_in_new_process, on its parent's database
        _first_view(args.first_view)
        return
    if args.only_pages:
        shapes = [s for s in args.only_pages.split(",") if s]
        unknown = sorted(set(shapes) - set(PAGE_SHAPES))
        if unknown:
            raise SystemExit(f"unknown shape {unknown[0]!r} (shapes: {', '.join(PAGE_SHAPES)})")
        with tempfile.TemporaryDirectory(prefix="dra-web-bench-") as tmp:
            _setup(tmp)
            failing_run_pages(shapes, args.repeat)
        return

    with tempfile.TemporaryDirectory(prefix="dra-web-bench-") as tmp:
        _setup(tmp)
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from bench.workloads import as_exported, synthetic_cluster, to_json, to_yaml, upload_yaml
        from dra_web.runs.models import Run
        from dra_web.runs.worker import store_output

        user = get_user_model().objects.create_user("bench")
        client = APIClient()
        client.force_authenticate(user)

        # --- 1. upload + parse ----------------------------------------------------------
        # The server's own warm-up (imports on the first request), not the upload's.
        warm_up = upload_yaml(0.05).encode()
        client.post("/api/snapshots/?name=w", warm_up, content_type="application/yaml")
        plain = upload_yaml(args.megabytes / 2).encode()
        # ~10 MB as kubectl exports it (managedFields, random UIDs, status) at the default.
        exported_scale = max(1, int(50 * args.megabytes))
        cluster = as_exported(
            synthetic_cluster(
                nodes=exported_scale,
                running_pods=2 * exported_scale,
                pending_pods=exported_scale,
            )
        )
        exported = to_yaml(cluster).encode()
        kubectl_style = _kubectl_style(cluster).encode()  # adds env values: written after
        for label, body in (
            ("bench/workloads.py upload", plain),
            ("as kubectl exports it", exported),
            ('go-yaml quoting, env "no"/"on"', kubectl_style),
        ):
            times = []
            for attempt in range(args.upload_repeat):
                # One more Namespace each time: different content, so that every upload is
                # parsed and stored as a first upload is (a comment only changed the files:
                # the documents were recognised and not stored again).
                namespace = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bench-{attempt}\n"
                start = time.perf_counter()
                cpu = time.process_time()
                response = client.post(
                    f"/api/snapshots/?name={attempt}",
                    namespace.encode() + b"---\n" + body,
                    content_type="application/yaml",
                )
                upload = time.perf_counter() - start
                assert response.status_code == 201, response.content[:500]
                assert response.json()["existing"] is False
                times.append(upload)
                print(
                    f"upload+parse: {len(body) / 1e6:.1f} MB YAML ({label}): {upload:.2f} s "
                    f"(CPU {time.process_time() - cpu:.2f} s; target 1 s)"
                )
            print(
                f"upload+parse: {len(body) / 1e6:.1f} MB YAML ({label}): median "
                f"{statistics.median(times):.2f} s of {len(times)} stored uploads"
            )
        scale = max(1, int(150 * args.megabytes))
        text = to_yaml(
            as_exported(synthetic_cluster(nodes=scale, running_pods=2 * scale, pending_pods=scale))
        ).encode()
        mb = len(text) / 1e6
        start = time.perf_counter()
        response = client.post("/api/snapshots/?name=bench", text, content_type="application/yaml")
        upload = time.perf_counter() - start
        assert response.status_code == 201, response.content[:500]
        body = response.json()
        objects = sum(body["objectCounts"].values())
        print(
            f"upload+parse: {mb:.1f} MB YAML as kubectl exports it, {objects} objects: "
            f"{upload:.2f} s "
            f"({mb / upload:.1f} MB/s)"
        )
        snapshot_id = body["id"]
        docs = synthetic_cluster(nodes=scale, running_pods=2 * scale, pending_pods=scale)
        for pod in docs:  # different content, so that it is parsed, not recognised
            pod.setdefault("metadata", {}).setdefault("labels", {})["bench"] = "json"
        json_text = to_json(docs).encode()
        start = time.perf_counter()
        response = client.post("/api/snapshots/?name=j", json_text, content_type="application/json")
        upload_json = time.perf_counter() - start
        assert response.status_code == 201, response.content[:500]
        print(
            f"upload+parse: {len(json_text) / 1e6:.1f} MB JSON list: {upload_json:.2f} s "
            f"({len(json_text) / 1e6 / upload_json:.1f} MB/s)"
        )
        start = time.perf_counter()
        again = client.post("/api/snapshots/?name=bench", text, content_type="application/yaml")
        print(
            f"same upload again (recognised, existing={again.json()['existing']}): "
            f"{time.perf_counter() - start:.2f} s"
        )
        if args.only_upload:
            return

        # --- 2. a run page's data with a large trace ---------------------------------------
        trace = synthetic_trace(args.trace_nodes)
        result = {
            "schemaVersion": "v1",
            "pods": [],
            "nodeClaims": [],
            "stats": {"pods": 0, "scheduled": 0, "failed": 0},
        }
        run = Run.objects.create(snapshot_id=snapshot_id, owner=user, options={"trace": True})
        start = time.perf_counter()
        store_output(run.pk, result, trace)
        print(
            f"store a {len(trace['nodes'])}-node trace (blob + index): "
            f"{time.perf_counter() - start:.2f} s"
        )
        run.refresh_from_db()
        raw = len(json.dumps(trace, separators=(",", ":")))
        print(
            f"trace blob: {len(bytes(run.trace_blob)) / 1e6:.2f} MB compressed "
            f"({raw / 1e6:.1f} MB JSON)"
        )
        base = f"/api/runs/{run.pk}"
        busiest = 4  # the first request node: 8 device children
        deep = len(trace["nodes"]) - 1
        cases = [
            ("snapshot detail (objects per kind)", f"/api/snapshots/{snapshot_id}/"),
            ("run detail", f"{base}/"),
            ("trace roots (page of 50)", f"{base}/trace/?parent=root"),
            ("trace children of a node", f"{base}/trace/?parent={busiest}"),
            ("trace node + path (deepest, last)", f"{base}/trace/?node={deep}"),
            ("trace search q=gpu-7", f"{base}/trace/?q=gpu-7&page_size=50"),
            ("trace filter reason=capacity", f"{base}/trace/?reason=capacity&page_size=50"),
            ("trace page 100 of all", f"{base}/trace/?page=100&page_size=100"),
        ]
        print(f"API latency over {args.repeat} requests (median / p95):")
        for label, url in cases:
            med, p95, resp = _timed(lambda u=url: client.get(u), args.repeat)
            assert resp.status_code == 200, (url, resp.status_code)
            print(f"  {label:36s} {med * 1000:7.1f} ms / {p95 * 1000:7.1f} ms")
        other = Run.objects.create(snapshot_id=snapshot_id, owner=user, options={"trace": True})
        trace_b = synthetic_trace(args.trace_nodes)
        for node in trace_b["nodes"][1000:1100]:
            node["status"] = "ok"
        store_output(other.pk, result, trace_b)
        first, _, resp = _timed(lambda: client.get(f"{base}/diff/{other.pk}/"), 1)
        cached, _, _ = _timed(lambda: client.get(f"{base}/diff/{other.pk}/"), 5)
        points = resp.json()["trace"]["divergenceCount"]
        print(
            f"  {'diff of two 100k-node traces':36s} {first * 1000:7.1f} ms first, "
            f"{cached * 1000:.1f} ms cached ({points} divergence points)"
        )


if __name__ == "__main__":
    main()
