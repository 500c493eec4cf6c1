"""Every suggestion of every example snapshot, applied as its JSON patch with the JSON-patch
library (as ``kubectl patch --type json`` would apply it) to the object it names, simulated
again: the pod is placed. A ``delete`` change is applied as ``kubectl delete`` (the pods go,
the claims they alone reserved are released). A suggestion with ``changes`` applies each in
turn."""

from __future__ import annotations

from pathlib import Path

import jsonpatch
import pytest

from allocator.edits import object_name, object_patches
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_documents, load_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(ROOT.joinpath("examples").glob("*.yaml"))
FIXTURES = ROOT / "tests" / "fixtures"
CATALOG = FIXTURES / "suggestions" / "aws-gpu-instance-types.json"
# The suggestion fixtures and the pages' real-world snapshots, with the AWS catalog they use.
SNAPSHOTS = [
    *([p] for p in EXAMPLES),
    *(
        [p, CATALOG]
        for p in sorted((FIXTURES / "suggestions").iterdir())
        if p.suffix in (".yaml", ".json") and p != CATALOG
    ),
    *([p] for p in sorted((FIXTURES / "pages").glob("*.yaml"))),
]


def run(documents: list[tuple[str, dict]], **options) -> dict:
    return simulate(load_documents(documents), SimulationOptions(**options)).result


def pod_result(result: dict, key: str) -> dict:
    return next(p for p in result["pods"] if p["pod"] == key)


def patched(docs: list[tuple[str, dict]], change: dict, patch: list[dict] | None):
    """The documents after one change, applied the way a user would apply it."""
    if change.get("op") == "delete":
        gone = set(change.get("objects") or [change["object"]])
        kept = [(k, d) for k, d in docs if object_name(k, d) not in gone]
        for k, d in kept:
            status = d.get("status") or {}
            if k == "ResourceClaim" and status.get("reservedFor"):
                ns = d["metadata"].get("namespace") or "default"
                status["reservedFor"] = [
                    r for r in status["reservedFor"] if f"Pod {ns}/{r.get('name')}" not in gone
                ]
                if not status["reservedFor"]:
                    status.pop("allocation", None)
        return kept
    assert patch is not None, change
    out, found = [], False
    for k, d in docs:
        if object_name(k, d) == change["object"]:
            d = jsonpatch.apply_patch(d, patch)
            found = True
        out.append((k, d))
    if not found:  # a Namespace the export left out: kubectl would find it in the cluster
        kind, _, name = change["object"].partition(" ")
        assert kind == "Namespace"
        empty = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}
        out.insert(0, (kind, jsonpatch.apply_patch(empty, patch)))
    return out


def cases():
    for paths in SNAPSHOTS:
        docs = load_paths([str(p) for p in paths]).documents
        result = run(docs)
        for entry in result["pods"]:
            for n, suggestion in enumerate(entry.get("suggestions") or []):
                yield pytest.param(
                    docs,
                    entry["pod"],
                    suggestion,
                    id=f"{paths[0].stem}:{entry['pod']}:{n}:{suggestion['kind']}",
                )


CASES = list(cases())


def test_the_examples_offer_suggestions_to_patch():
    kinds = {c.values[2]["kind"] for c in CASES}
    assert len(CASES) >= 30, len(CASES)
    assert {"nodepool-requirement", "relax-selector", "reduce-count"} <= kinds


@pytest.mark.parametrize(("docs", "pod", "suggestion"), CASES)
def test_each_suggested_patch_places_the_pod(docs, pod, suggestion):
    changes = suggestion.get("changes") or [suggestion]
    after = docs
    for entry in changes:
        change = entry.get("change", entry)
        if not change.get("objects") and "patches" not in entry:
            after = patched(after, change, entry.get("patch"))
            continue
        for one in object_patches(entry, change):  # a workload-wide change: every replica
            after = patched(after, {**change, "object": one["object"]}, one["patch"])
    placed = pod_result(run(after, suggestions=False), pod)
    assert placed["scheduled"], placed["error"]


def test_the_cli_text_shows_the_patch_and_the_recreate_steps(capsys):
    from allocator.cli import main

    demo = str(ROOT / "examples" / "demo-snapshot.yaml")
    assert main(["simulate", demo]) in (0, 1)
    out = capsys.readouterr().out
    assert (
        "patch: kubectl patch nodepool gpu-general --type json -p "
        '\'[{"op":"remove","path":"/spec/template/spec/requirements/0"}]\''
    ) in out
    assert "recreate (ReplicaSet ml-training/giant-a100):" in out
    assert "kubectl delete resourceclaimtemplate -n ml-training a100-x40" in out


@pytest.mark.parametrize(("docs", "pod", "suggestion"), CASES)
def test_each_suggestion_as_a_what_if_places_the_pod(docs, pod, suggestion):
    """What "Try this fix" sends (pages presenters.what_if_edits), applied as the variants
    endpoint applies it (allocator.edits.apply_edits)."""
    from allocator.edits import apply_edits
    from dra_web.pages.presenters import what_if_edits

    edits = what_if_edits(suggestion)
    assert edits, suggestion
    placed = pod_result(run(apply_edits(docs, edits), suggestions=False), pod)
    assert placed["scheduled"], placed["error"]


def test_a_workload_wide_topology_fix_patches_every_replica():
    """Relaxing the vLLM replicas' anti-affinity is one change of every replica: alike, they
    share ``patch`` (no ``patches`` listing it per replica again), and "Try this fix" sends it
    for each of them, since a replica that keeps the required term still repels the third."""
    from dra_web.pages.presenters import what_if_edits

    docs = load_paths([str(ROOT / "examples" / "topology-vllm-anti-affinity.yaml")]).documents
    for kind, d in docs:
        if kind == "NodePool":
            d["spec"]["limits"] = {"cpu": "400"}  # two p5.48xlarge: the third replica fails
    result = run(docs)
    third = "inference/vllm-7c9d8f6b5-tn4vd"
    relaxed = next(
        s for s in pod_result(result, third)["suggestions"] if s["kind"] == "relax-topology"
    )
    objects = sorted(relaxed["change"]["objects"])
    assert len(objects) == 3 and "patches" not in relaxed
    edits = what_if_edits(relaxed)
    assert sorted(e["object"] for e in edits) == objects
    assert all(e["patch"] == relaxed["patch"] for e in edits)
    after = docs
    for edit in edits:
        after = patched(after, {"object": edit["object"], "op": "set"}, edit["patch"])
    assert pod_result(run(after, suggestions=False), third)["scheduled"]
