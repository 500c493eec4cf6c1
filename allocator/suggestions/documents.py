"""A suggestion's change applied to a snapshot's raw documents: what the tests, the whole-loop
re-run of a suggestion and the pages' YAML patch read."""

from __future__ import annotations

import copy


def apply_change(documents: list[dict], change: dict) -> list[dict]:
    """The raw documents with ``change`` applied: ``set`` writes ``value`` at ``field`` of the
    object named ``object`` (``Kind namespace/name`` or ``Kind name``), or of each of
    ``objects`` when given; ``delete`` removes every object of ``objects``. The input is left
    untouched."""
    if change.get("op") == "delete":
        gone = set(change.get("objects") or [change["object"]])
        kept = [copy.deepcopy(d) for d in documents if _object_name(d) not in gone]
        for doc in kept:
            if doc.get("kind") == "ResourceClaim":
                _release(doc, gone)
        return kept
    out = []
    found = False
    # ``objects`` on a set: the same field set in each (every pod of a workload).
    targets = set(change.get("objects") or [change["object"]])
    for doc in documents:
        doc = copy.deepcopy(doc)
        if _object_name(doc) in targets:
            _set_path(doc, change["field"], copy.deepcopy(change["value"]))
            found = True
        out.append(doc)
    kind, _, name = change["object"].partition(" ")
    if not found and kind == "Namespace":  # one the export left out: created, as kubectl would
        doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        _set_path(doc, change["field"], copy.deepcopy(change["value"]))
        out.insert(0, doc)
    return out


def _release(claim: dict, gone: set[str]) -> None:
    """What the resourceclaim controller does when pods go: drop them from ``reservedFor``
    and deallocate a claim that nobody reserves any more."""
    status = claim.get("status")
    if not isinstance(status, dict) or not status.get("reservedFor"):
        return
    ns = (claim.get("metadata") or {}).get("namespace") or "default"
    before = status["reservedFor"]
    status["reservedFor"] = [
        r
        for r in before
        if not (r.get("resource") == "pods" and f"Pod {ns}/{r.get('name')}" in gone)
    ]
    if len(status["reservedFor"]) < len(before) and not status["reservedFor"]:
        status.pop("allocation", None)
        status.pop("reservedFor", None)


def _object_name(doc: dict) -> str:
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace")
    if ns is None and doc.get("kind") in _NAMESPACED:
        ns = "default"
    name = f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))
    return f"{doc.get('kind')} {name}"


_NAMESPACED = {"Pod", "ResourceClaim", "ResourceClaimTemplate"}


def _set_path(doc: dict, path: str, value) -> None:
    """``spec.devices.requests[0].exactly.count`` style paths; missing maps are created."""
    steps: list[str | int] = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        steps.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            steps.append(int(index))
            rest = rest.lstrip("[")
    node = doc
    for step, following in zip(steps, steps[1:], strict=False):
        if isinstance(step, int):
            node = node[step]
        else:
            if node.get(step) is None:
                node[step] = [] if isinstance(following, int) else {}
            node = node[step]
    last = steps[-1]
    if value is None and isinstance(last, str):
        node.pop(last, None)
    else:
        node[last] = value


def apply_suggestion(documents: list[dict], suggestion: dict) -> list[dict]:
    """The raw documents with every change of ``suggestion`` applied: its ``changes`` (a
    two-change suggestion), else its one ``change``."""
    for change in suggestion.get("changes") or [suggestion["change"]]:
        documents = apply_change(documents, change)
    return documents
