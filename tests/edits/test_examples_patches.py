"""Every suggestion of every example snapshot, applied as its JSON patch with the JSON-patch
library (as ``kubectl patch --type json`` would apply it) to the object it names, simulated
again: the pod is placed. A ``delete`` change is applied as ``kubectl delete`` (the pods go,
the claims they alone reserved are released). A suggestion with ``changes`` applies each in
turn."""

from __future__ import annotations

from pathlib import Path

import jsonpatch
import pytest
import yaml

from allocator.edits import object_name
from tests.scheduling.k8s import pod_result, run

EXAMPLES = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.yaml"))


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def patched(docs: list[dict], change: dict, patch: list[dict] | None) -> list[dict]:
    """The documents after one change, applied the way a user would apply it."""
    if change.get("op") == "delete":
        gone = set(change.get("objects") or [change["object"]])
        kept = [d for d in docs if object_name(d["kind"], d) not in gone]
        for d in kept:
            status = d.get("status") or {}
            if d["kind"] == "ResourceClaim" and status.get("reservedFor"):
                ns = d["metadata"].get("namespace") or "default"
                status["reservedFor"] = [
                    r for r in status["reservedFor"] if f"Pod {ns}/{r.get('name')}" not in gone
                ]
                if not status["reservedFor"]:
                    status.pop("allocation", None)
        return kept
    assert patch is not None, change
    out, found = [], False
    for d in docs:
        if object_name(d["kind"], d) == change["object"]:
            d = jsonpatch.apply_patch(d, patch)
            found = True
        out.append(d)
    if not found:  # a Namespace the export left out: kubectl would find it in the cluster
        kind, _, name = change["object"].partition(" ")
        assert kind == "Namespace"
        out.insert(
            0,
            jsonpatch.apply_patch(
                {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}, patch
            ),
        )
    return out


def cases():
    for path in EXAMPLES:
        docs = documents(path)
        result = run(docs)
        for entry in result["pods"]:
            for n, suggestion in enumerate(entry.get("suggestions") or []):
                yield pytest.param(
                    docs,
                    entry["pod"],
                    suggestion,
                    id=f"{path.stem}:{entry['pod']}:{n}:{suggestion['kind']}",
                )


CASES = list(cases())


def test_the_examples_offer_suggestions_to_patch():
    kinds = {c.values[2]["kind"] for c in CASES}
    assert len(CASES) >= 10, len(CASES)
    assert {"nodepool-requirement", "relax-selector", "reduce-count"} <= kinds


@pytest.mark.parametrize(("docs", "pod", "suggestion"), CASES)
def test_each_suggested_patch_places_the_pod(docs, pod, suggestion):
    changes = suggestion.get("changes") or [suggestion]
    after = docs
    for entry in changes:
        change = entry.get("change", entry)
        after = patched(after, change, entry.get("patch"))
    placed = pod_result(run(after, suggestions=False), pod)
    assert placed["scheduled"], placed["error"]


def test_the_cli_text_shows_the_patch_and_the_recreate_steps(capsys):
    from allocator.cli import main

    demo = str(EXAMPLES[0].parent / "demo-snapshot.yaml")
    assert main(["simulate", demo]) in (0, 1)
    out = capsys.readouterr().out
    assert (
        "patch: kubectl patch nodepool gpu-general --type json -p "
        '\'[{"op":"remove","path":"/spec/template/spec/requirements/0"}]\''
    ) in out
    assert "recreate (ReplicaSet ml-training/giant-a100):" in out
    assert "kubectl delete resourceclaimtemplate -n ml-training a100-x40" in out
