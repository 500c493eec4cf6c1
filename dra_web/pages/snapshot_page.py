"""The snapshot page's model (reads only): its objects by kind, a page at a time, its device
classes, its runs, and what the form to start a run on it offers."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from allocator.edits import object_name
from allocator.featuregates import GATE_NAMES
from dra_web.pages import presenters
from dra_web.pages import selectors as page_selectors
from dra_web.runs import selectors as run_selectors
from dra_web.snapshots import selectors as snapshot_selectors
from dra_web.snapshots.models import Snapshot

OBJECTS_PER_PAGE = 40
RUNS_SHOWN = 20


def snapshot_page(snapshot: Snapshot, kind: str | None, number: str | None) -> dict[str, Any]:
    """The page's template context; ``kind`` (the most numerous kind when None) picks the
    objects listed, 404 when the snapshot has none of it."""
    by_kind = snapshot_selectors.objects_by_kind(snapshot)
    kinds = sorted(by_kind, key=lambda k: (-len(by_kind[k]), k))
    kind = kind or (kinds[0] if kinds else "")
    if kind and kind not in by_kind:
        raise Http404(f"no {kind} in this snapshot")
    for obj in by_kind.get(kind, []):
        obj["ref"] = object_name(kind, obj["raw"]) if isinstance(obj["raw"], dict) else ""
    return {
        "snapshot": snapshot,
        "edits": presenters.input_changes_view(snapshot.edits),
        "kinds": [(k, len(by_kind[k])) for k in kinds],
        "kind": kind,
        "objects": presenters.page_of(by_kind.get(kind, []), OBJECTS_PER_PAGE, number),
        "device_classes": presenters.device_class_rows(by_kind.get("DeviceClass", [])),
        "runs": run_selectors.run_list(snapshot=snapshot)[:RUNS_SHOWN],
        "nodes": page_selectors.node_names(snapshot),
        "gate_names": GATE_NAMES,
    }
