"""Reads for snapshots."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from dra_web.snapshots.models import Snapshot


def snapshot_list(*, owner=None, q: str | None = None) -> QuerySet[Snapshot]:
    qs = Snapshot.objects.select_related("owner").defer(
        "files_blob", "documents_blob", "object_index"
    )
    if owner is not None:
        qs = qs.filter(owner__username=owner) if isinstance(owner, str) else qs.filter(owner=owner)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(file_names__icontains=q))
    return qs


def get_snapshot(snapshot_id) -> Snapshot:
    return get_object_or_404(Snapshot.objects.select_related("owner"), pk=snapshot_id)


def _identity(raw: dict) -> tuple[str | None, str]:
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    return meta.get("namespace"), str(meta.get("name") or raw.get("name") or "")


def snapshot_objects(snapshot: Snapshot, kind: str | None = None) -> list[dict]:
    out = []
    for k, raw in snapshot.documents():
        if kind and k != kind:
            continue
        namespace, name = _identity(raw)
        out.append({"kind": k, "namespace": namespace, "name": name, "raw": raw})
    return out


def object_refs(snapshot: Snapshot) -> dict[str, list[dict]]:
    """kind -> [{"namespace", "name"}], from the index stored at upload (no decompression)."""
    if not snapshot.object_index and snapshot.object_counts:
        return {
            kind: [{"namespace": o["namespace"], "name": o["name"]} for o in objs]
            for kind, objs in objects_by_kind(snapshot).items()
        }
    return {
        kind: [{"namespace": ns, "name": name} for ns, name in refs]
        for kind, refs in snapshot.object_index.items()
    }


def objects_by_kind(snapshot: Snapshot) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for obj in snapshot_objects(snapshot):
        grouped.setdefault(obj["kind"], []).append(
            {"namespace": obj["namespace"], "name": obj["name"], "raw": obj["raw"]}
        )
    return grouped


def run_kubernetes_version(snapshot: Snapshot) -> str | None:
    """The feature gate preset a run of this snapshot starts from when its options do not
    name one: the live-imported server's release, where there is a preset for it."""
    from allocator.featuregates import KUBERNETES_VERSIONS, release_of

    release = release_of(snapshot.kubernetes_version) if snapshot.kubernetes_version else None
    return release if release in KUBERNETES_VERSIONS else None


def with_run_defaults(snapshot: Snapshot, options: object) -> object:
    """Run options with what the snapshot decides when they leave it out: ``kubernetesVersion``
    (an explicit null keeps every gate on). Anything but an object is left for the options'
    own validation to refuse."""
    version = run_kubernetes_version(snapshot)
    if version is None or not (options is None or isinstance(options, dict)):
        return options
    if options and "kubernetesVersion" in options:
        return options
    return {**(options or {}), "kubernetesVersion": version}
