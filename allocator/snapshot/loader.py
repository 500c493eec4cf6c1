"""Load a cluster snapshot (docs/SNAPSHOT.md) into ``allocator.model.Snapshot``.

All problems of a load are collected, then raised together as one ``SnapshotError``; each
reads ``FILE doc N Kind namespace/name: field.path: message`` with N the 1-based position of
the object in its file (Lists flattened). Unknown kinds are warnings, never errors; unknown
fields are kept in ``raw`` and never rejected.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from typing import Any

from allocator.collector import collector_paused
from allocator.model import Snapshot
from allocator.records import record
from allocator.snapshot import apps, beside, core, karpenter, resource, storage
from allocator.snapshot.decode import RawObject, Unchecked, decode_file, read_file, settle
from allocator.snapshot.errors import SnapshotError
from allocator.snapshot.fields import Context, check_metadata
from allocator.snapshot.names import DNS_LABEL, DNS_SUBDOMAIN, NAME_RULES, name_problem
from allocator.snapshot.unsimulated import SkippedKinds, field_warnings, kind_row

SNAPSHOT_EXTENSIONS = (".yaml", ".yml", ".json")


@record(frozen=True)
class KindSpec:
    """How one kind is read: its API group, whether namespaced, its builder and store."""

    group: str
    namespaced: bool
    build: Callable[[Context, dict], Any]
    store: Callable[[Snapshot, Any], None]
    key: Callable[[Any], str]


def _append(attr: str) -> Callable[[Snapshot, Any], None]:
    def store(snapshot: Snapshot, obj: Any) -> None:
        getattr(snapshot, attr).append(obj)

    return store


def _by_key(attr: str, key: Callable[[Any], str]) -> Callable[[Snapshot, Any], None]:
    def store(snapshot: Snapshot, obj: Any) -> None:
        getattr(snapshot, attr)[key(obj)] = obj

    return store


def _name(o: Any) -> str:
    return o.name


def _ns_name(o: Any) -> str:
    return f"{o.namespace}/{o.name}"


KINDS: dict[str, KindSpec] = {
    "ResourceSlice": KindSpec(
        "resource.k8s.io", False, resource.build_resource_slice, _append("resource_slices"), _name
    ),
    "DeviceClass": KindSpec(
        "resource.k8s.io",
        False,
        resource.build_device_class,
        _by_key("device_classes", _name),
        _name,
    ),
    "ResourceClaim": KindSpec(
        "resource.k8s.io",
        True,
        resource.build_resource_claim,
        _by_key("resource_claims", _ns_name),
        _ns_name,
    ),
    "ResourceClaimTemplate": KindSpec(
        "resource.k8s.io",
        True,
        resource.build_resource_claim_template,
        _by_key("resource_claim_templates", _ns_name),
        _ns_name,
    ),
    "DeviceTaintRule": KindSpec(
        "resource.k8s.io",
        False,
        resource.build_device_taint_rule,
        _append("device_taint_rules"),
        _name,
    ),
    "Namespace": KindSpec("", False, core.build_namespace, _by_key("namespaces", _name), _name),
    "Node": KindSpec("", False, core.build_node, _by_key("nodes", _name), _name),
    "Pod": KindSpec("", True, core.build_pod, _append("pods"), _ns_name),
    "NodePool": KindSpec(
        "karpenter.sh", False, karpenter.build_node_pool, _by_key("node_pools", _name), _name
    ),
    "NodeClaim": KindSpec(
        "karpenter.sh", False, karpenter.build_node_claim, _by_key("node_claims", _name), _name
    ),
    "InstanceType": KindSpec(
        "dra-web.io",
        False,
        karpenter.build_instance_type,
        _by_key("instance_types", _name),
        _name,
    ),
    "PersistentVolumeClaim": KindSpec(
        "",
        True,
        storage.build_persistent_volume_claim,
        _by_key("persistent_volume_claims", _ns_name),
        _ns_name,
    ),
    "PersistentVolume": KindSpec(
        "",
        False,
        storage.build_persistent_volume,
        _by_key("persistent_volumes", _name),
        _name,
    ),
    "StorageClass": KindSpec(
        "storage.k8s.io",
        False,
        storage.build_storage_class,
        _by_key("storage_classes", _name),
        _name,
    ),
    "CSINode": KindSpec(
        "storage.k8s.io", False, storage.build_csi_node, _by_key("csi_nodes", _name), _name
    ),
    "DaemonSet": KindSpec(
        "apps", True, apps.build_daemon_set, _by_key("daemon_sets", _ns_name), _ns_name
    ),
}


def _group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _load_object(
    raw: RawObject,
    snapshot: Snapshot,
    problems: list[str],
    seen: dict[tuple[str, str], str],
    skipped: SkippedKinds,
) -> None:
    obj = raw.obj
    where = f"{raw.file} doc {raw.index}"
    if not isinstance(obj, dict):
        problems.append(f"{where}: must be an object, not {type(obj).__name__}")
        return
    converted = karpenter.is_kwok_instance_type(obj)
    if converted:
        name_key = karpenter.kwok_name_key(obj)
        name = obj.get(name_key) if isinstance(obj.get(name_key), str) else None
        ctx = Context(raw.file, raw.index, "InstanceType", None, name, problems)
        before = len(problems)
        if not name:
            ctx.problem(name_key, "required")
            return
        bad = name_problem(name, NAME_RULES["InstanceType"], "InstanceType name")
        if bad:
            ctx.problem(name_key, bad)
        obj = karpenter.convert_kwok_instance_type(ctx, obj, snapshot.warnings)
        if len(problems) != before:
            return  # reported once, with the paths of the user's file
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        problems.append(f"{where}: kind: required")
        return
    if api_version is not None and not isinstance(api_version, str):
        problems.append(f"{where} {kind}: apiVersion: must be a string")
        return
    md = obj.get("metadata")
    md_ok = isinstance(md, dict)
    name = md.get("name") if md_ok and isinstance(md.get("name"), str) else None
    namespace = md.get("namespace") if md_ok and isinstance(md.get("namespace"), str) else None
    spec = KINDS.get(kind)
    if spec is None or (api_version is not None and _group(api_version) != spec.group):
        row = kind_row(kind, _group(api_version) if api_version is not None else None)
        if row is not None:  # changes scheduling: one warning per kind, saying why
            skipped.add(row, obj)
            return
        label = f"{namespace}/{name}" if namespace else (name or "<unnamed>")
        snapshot.warnings.append(
            f"{where} {kind} {label}: unknown kind {kind} ({api_version or 'no apiVersion'}), "
            "skipped"
        )
        return
    namespace = (namespace or "default") if spec.namespaced else None
    ctx = Context(raw.file, raw.index, kind, namespace, name, problems)
    before = len(problems)
    if md is not None and not md_ok:
        ctx.problem("metadata", "must be an object")
        return
    if not md_ok:
        ctx.problem("metadata", "required")
        return
    if not name:
        raw_name = md.get("name")
        missing = raw_name is None or raw_name == ""
        ctx.problem("metadata.name", "required" if missing else "must be a string")
    elif not converted:
        bad = name_problem(name, NAME_RULES.get(kind, DNS_SUBDOMAIN), f"{kind} name")
        if bad:
            ctx.problem("metadata.name", bad)
    if md.get("namespace") is not None and not isinstance(md.get("namespace"), str):
        ctx.problem("metadata.namespace", "must be a string")
    elif spec.namespaced and md.get("namespace"):
        bad = name_problem(md["namespace"], DNS_LABEL, "namespace")
        if bad:
            ctx.problem("metadata.namespace", bad)
    check_metadata(ctx, md)
    built = spec.build(ctx, obj)
    if len(problems) != before:
        return
    key = (kind, spec.key(built))
    if key in seen:
        winner = (
            _catalog_duplicate(snapshot, obj, name, where, seen[key])
            if kind == "InstanceType"
            else None
        )
        if winner is None:
            ctx.problem("metadata.name", f"duplicate {kind} (first defined in {seen[key]})")
        elif winner == "this":
            seen[key] = where
            spec.store(snapshot, built)
            snapshot.documents.append((kind, obj))
        return
    seen[key] = where
    spec.store(snapshot, built)
    snapshot.documents.append((kind, obj))


# An InstanceType from a generated catalog (``python -m allocator catalog``) carries this
# annotation; one the user wrote with the same name wins over it, whichever file comes first.
CATALOG_ANNOTATION = "dra-web.io/catalog-source"


def _is_catalog_entry(obj: dict) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, dict) and CATALOG_ANNOTATION in annotations


def _catalog_duplicate(
    snapshot: Snapshot, obj: dict, name: str | None, where: str, first: str
) -> str | None:
    """A second InstanceType of the same name: None when neither comes from a catalog (an
    error), else which one is kept ("first" or "this"), said in a warning; the catalog's entry
    is the one left out (the first of two catalog entries is kept)."""
    index = next(
        i
        for i, (k, raw) in enumerate(snapshot.documents)
        if k == "InstanceType" and (raw.get("metadata") or {}).get("name") == name
    )
    if _is_catalog_entry(obj):
        snapshot.warnings.append(
            f"{where} InstanceType {name}: the catalog's entry is left out, the one of {first} "
            "is kept"
        )
        return "first"
    if not _is_catalog_entry(snapshot.documents[index][1]):
        return None
    del snapshot.documents[index]
    snapshot.warnings.append(
        f"{first} InstanceType {name}: the catalog's entry is left out, the one of {where} is kept"
    )
    return "this"


def load_files(files: list[tuple[str, bytes | str]]) -> Snapshot:
    """Load (file name, content) pairs; raise SnapshotError listing every problem."""
    with collector_paused():
        return load_decoded(decode_files(files))


@record
class Decoded:
    """Files decoded (``decode_files``): per file, its objects in order and its problems.

    Decoded with ``check=False``, a file yaml-rs read holds its objects as read and its
    ``Unchecked`` verdict in ``unchecked``: ``within`` tells whether those objects stand,
    ``settled`` finishes every such file as ``decode_file`` does."""

    files: list[tuple[list[RawObject], list[str]]]
    unchecked: list[Unchecked | None] = field(default_factory=list)  # per file, or empty

    @property
    def objects(self) -> list[RawObject]:
        return [raw for objects, _ in self.files for raw in objects]

    @property
    def refused(self) -> bool:
        return any(problems for _, problems in self.files)

    @property
    def checked(self) -> bool:
        return not any(self.unchecked)

    def within(self) -> bool:
        """Whether every file's objects stand as decoded: ``settled`` would change nothing."""
        return all(u.within() for u in self.unchecked if u is not None)

    def settled(self) -> Decoded:
        """Every file as ``decode_files`` decodes it (the same objects where they stand)."""
        if self.checked:
            return self
        files = []
        for (objects, problems), unchecked in zip(self.files, self.unchecked, strict=True):
            if unchecked is not None:
                problems = list(problems)
                objects = settle(unchecked, problems)
            files.append((objects, problems))
        return Decoded(files)


def decode_files(files: list[tuple[str, bytes | str]], *, check: bool = True) -> Decoded:
    """The first half of ``load_files``: each file decoded and held to the bounds, nothing
    built yet (``load_decoded`` builds the objects and raises the problems). ``check=False``
    leaves yaml-rs' verdicts to come (``Decoded.within``, ``Decoded.settled``): a caller
    with a second core asks them there while it builds."""
    decoded = []
    pending: list[Unchecked | None] = []
    with collector_paused():
        for name, content in files:
            problems: list[str] = []
            objects, unchecked = read_file(name, content, problems)
            if check and unchecked is not None:
                objects, unchecked = settle(unchecked, problems), None
            decoded.append((objects, problems))
            pending.append(unchecked)
    return Decoded(decoded, pending)


def load_decoded(decoded: Decoded, *, unchecked: bool = False) -> Snapshot:
    """The second half of ``load_files``: the typed snapshot of decoded files, problems in
    file order. The decoded objects are read, never changed: a document kept as decoded is
    the very object. ``unchecked``: built before yaml-rs' verdicts (``decode_files`` with
    ``check=False``); it stands only if ``decoded.within()``."""
    if not unchecked and not decoded.checked:
        raise ValueError("decoded files with yaml-rs' verdicts to come: settle them first")
    return _build(decoded.files)


def _build(files: Iterable[tuple[Iterable[RawObject], list[str]]]) -> Snapshot:
    """The typed snapshot of files' objects and decoding problems, in file order."""
    problems: list[str] = []
    snapshot = Snapshot()
    seen: dict[tuple[str, str], str] = {}
    skipped = SkippedKinds()
    with collector_paused():
        for objects, refused in files:
            problems.extend(refused)
            for raw in objects:
                _load_object(raw, snapshot, problems, seen, skipped)
    return _finish(snapshot, problems, skipped)


def _finish(snapshot: Snapshot, problems: list[str], skipped: SkippedKinds) -> Snapshot:
    if problems:
        raise SnapshotError(problems)
    if not snapshot.documents:
        raise SnapshotError(["snapshot holds no recognised objects"])
    snapshot.warnings.extend(skipped.warnings())
    snapshot.unsimulated = field_warnings(snapshot.documents)
    return snapshot


def load_documents(documents: list[tuple[str, dict]], file: str = "stored") -> Snapshot:
    """Build a Snapshot from documents already decoded and normalised by an earlier load
    (``Snapshot.documents``: (kind, raw) in load order), skipping the YAML/JSON parse.

    The same objects come out as from ``load_files`` of the original files; problems name
    ``FILE doc N`` with N the document's place in ``documents``.
    """
    problems: list[str] = []
    snapshot = Snapshot()
    seen: dict[tuple[str, str], str] = {}
    skipped = SkippedKinds()
    with collector_paused():
        for index, (kind, raw) in enumerate(documents, start=1):
            if isinstance(raw, dict) and raw.get("kind") != kind:
                problems.append(f"{file} doc {index}: stored as {kind} but holds {raw.get('kind')}")
                continue
            _load_object(RawObject(file, index, raw), snapshot, problems, seen, skipped)
    return _finish(snapshot, problems, skipped)


def _expand(path: str) -> list[str]:
    if os.path.isdir(path):
        return [
            os.path.join(root, f)
            for root, _, names in sorted(os.walk(path))
            for f in sorted(names)
            if f.endswith(SNAPSHOT_EXTENSIONS)
        ]
    return [path]


def load_paths(paths: list[str], *, read_beside: bool = False) -> Snapshot:
    """Load files (directories: their .yaml/.yml/.json files, sorted). ``read_beside``: a
    process with nothing else running in it (the command line) has long YAML streams read by
    a forked reader while it builds (``allocator.snapshot.beside``); the snapshot is the
    same."""
    files: list[tuple[str, bytes | str]] = []
    problems: list[str] = []
    for path in paths:
        for file in _expand(path):
            try:
                with open(file, "rb") as fh:
                    files.append((file, fh.read()))
            except OSError as err:
                problems.append(f"{file}: cannot read: {err.strerror or err}")
    if problems:
        raise SnapshotError(problems)
    if read_beside:
        try:
            return _build(_decoded_beside(files))
        except beside.ReadWhole:
            pass  # a piece's reading does not stand: every file decoded the usual way
    return load_files(files)


def _decoded_beside(
    files: list[tuple[str, bytes | str]],
) -> Iterator[tuple[Iterable[RawObject], list[str]]]:
    """``decode_files``' files, the long YAML streams read by a forked reader while the
    caller builds the objects before them; iterating raises ``beside.ReadWhole`` where that
    reading does not stand."""
    for name, content in files:
        pieces = beside.pieces_of(content)
        if pieces is not None:
            yield beside.read_beside(name, pieces), []
        else:
            problems: list[str] = []
            yield decode_file(name, content, problems), problems
