"""What changes scheduling in a real cluster but this simulation does not honour: one table.

A snapshot that uses any of these gets one warning per row (a count and a few example
objects), so that a user knows where the answer may differ from the cluster's. Whoever makes
the simulation honour a row removes it here, and the warning goes away; nothing else lists
them.

Field rows look at the raw documents of recognised kinds; kind rows are kinds the loader does
not read (skipped, with this warning instead of the generic "unknown kind" one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field

from allocator.records import record

MAX_EXAMPLES = 3


def _at(obj: object, *path: str) -> object:
    """The value at ``path`` of nested dicts, None when any step is missing or not a dict:
    the documents are as uploaded, and a warning must never fail on an odd shape."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _pending(pod: dict) -> bool:
    """Still to be scheduled (no node yet): the pods a pod-level row matters for."""
    return not _at(pod, "spec", "nodeName")


def _nonempty(*path: str) -> Callable[[dict], bool]:
    def present(obj: dict) -> bool:
        return bool(_at(obj, *path))

    return present


@record(frozen=True)
class FieldRow:
    """A field the simulation reads otherwise than the cluster, and how to find it."""

    kind: str
    field: str  # where a user finds it in the object
    why: str  # what the simulation does instead, and what that changes
    present: Callable[[dict], bool]
    pending_only: bool = False  # counted on pods not bound to a node yet


@record(frozen=True)
class KindRow:
    """A kind the simulation does not read, and what that changes."""

    kind: str
    group: str  # API group ("" for core/v1)
    why: str


FIELDS: tuple[FieldRow, ...] = (
    FieldRow(
        "Pod",
        "spec.priorityClassName",
        "priority and preemption are not simulated: a pending pod never preempts running "
        "pods of lower priority (kube-scheduler may, instead of waiting for a new node)",
        _nonempty("spec", "priorityClassName"),
        pending_only=True,
    ),
)

KINDS: tuple[KindRow, ...] = (
    KindRow(
        "PodDisruptionBudget",
        "policy",
        "disruption budgets are not read: --disrupt may displace pods that a budget protects",
    ),
    KindRow(
        "PriorityClass",
        "scheduling.k8s.io",
        "priority and preemption are not simulated",
    ),
    KindRow(
        "RuntimeClass",
        "node.k8s.io",
        "a RuntimeClass's scheduling (node selector, tolerations) is not applied to the pods "
        "that name it",
    ),
)

_KIND_ROWS = {(row.group, row.kind): row for row in KINDS}
_KIND_ROWS_BY_KIND = {row.kind: row for row in KINDS}
_FIELD_ROWS: dict[str, tuple[FieldRow, ...]] = {}
for _row in FIELDS:
    _FIELD_ROWS[_row.kind] = (*_FIELD_ROWS.get(_row.kind, ()), _row)


def kind_row(kind: str, group: str | None) -> KindRow | None:
    """The row of a kind the loader skips but that changes scheduling, if it is one (``group``
    None: an object without apiVersion, recognised by its kind alone)."""
    if group is None:
        return _KIND_ROWS_BY_KIND.get(kind)
    return _KIND_ROWS.get((group, kind))


def _label(obj: dict) -> str:
    namespace, name = _at(obj, "metadata", "namespace"), _at(obj, "metadata", "name")
    name = name if isinstance(name, str) and name else "<unnamed>"
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


@record
class _Seen:
    """How many objects showed a field, and the first few named."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, label: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(label)

    def objects(self, noun: str) -> str:
        more = self.count - len(self.examples)
        listed = ", ".join(self.examples) + (f" and {more} more" if more else "")
        plural = noun if self.count == 1 else noun + "s"
        return f"{self.count} {plural} ({listed})"


class SkippedKinds:
    """Objects of the kind rows met while loading, counted per kind."""

    def __init__(self) -> None:
        self._seen: dict[KindRow, _Seen] = {}

    def add(self, row: KindRow, obj: dict) -> None:
        self._seen.setdefault(row, _Seen()).add(_label(obj))

    def warnings(self) -> list[str]:
        return [
            f"not simulated: {seen.objects(row.kind)} skipped: {row.why}"
            for row, seen in self._seen.items()
        ]


def field_warnings(documents: Iterable[tuple[str, dict]]) -> list[str]:
    """One warning per field row that some document uses, in the table's order."""
    seen: dict[FieldRow, _Seen] = {}
    for kind, raw in documents:
        rows = _FIELD_ROWS.get(kind)
        if not rows or not isinstance(raw, dict):
            continue
        pending = kind == "Pod" and _pending(raw)
        for row in rows:
            if (pending or not row.pending_only) and row.present(raw):
                seen.setdefault(row, _Seen()).add(_label(raw))
    out = []
    for row in FIELDS:
        if row in seen:
            noun = "pod" if row.kind == "Pod" else row.kind
            noun = f"pending {noun}" if row.pending_only else noun
            objects = seen[row].objects(noun)
            out.append(f"not simulated: {row.kind} {row.field} on {objects}: {row.why}")
    return out
