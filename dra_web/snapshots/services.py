"""Writes for snapshots: upload (parse, hash, store compressed), live import, delete."""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from allocator import snapshot as snapshot_loader
from allocator.catalog import aws as aws_catalog
from allocator.catalog.render import to_yaml
from allocator.collector import collector_paused
from allocator.model import Snapshot as LoadedSnapshot
from dra_web import blobs, forked
from dra_web.snapshots.models import Snapshot

log = logging.getLogger(__name__)

MAX_NAME = 200


class SnapshotUploadError(Exception):
    """An upload that cannot be stored; ``problems`` name file, document, object and field."""

    def __init__(self, problems: Sequence[str] | str, status: int = 400) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.status = status
        super().__init__("; ".join(self.problems))


def _as_bytes(content: bytes | str) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else bytes(content)


def _check_size(files: Sequence[tuple[str, bytes]]) -> int:
    limit = settings.DRA_WEB_MAX_UPLOAD_BYTES
    total = sum(len(content) for _, content in files)
    if total > limit:
        raise SnapshotUploadError(
            f"upload is {total} bytes, larger than the limit of {limit} bytes "
            "(DRA_WEB_MAX_UPLOAD_BYTES)",
            status=413,
        )
    return total


def _checked_texts(files: Sequence[tuple[str, bytes | str]]) -> list[tuple[str, bytes]]:
    if not files:
        raise SnapshotUploadError("no snapshot given: send multipart 'file' or a YAML/JSON body")
    texts: list[tuple[str, bytes]] = [(name, _as_bytes(content)) for name, content in files]
    _check_size(texts)
    for name, content in texts:
        if not content.strip():
            raise SnapshotUploadError(f"{name}: file is empty")
        try:
            content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SnapshotUploadError(
                f"{name}: not UTF-8 text (byte {exc.start}): upload YAML or JSON"
            ) from None
    return texts


@contextmanager
def _loader_errors() -> Iterator[None]:
    """Every failure of the allocator's loader becomes a SnapshotUploadError (400)."""
    try:
        yield
    except SnapshotUploadError:
        raise
    except snapshot_loader.SnapshotError as exc:
        raise SnapshotUploadError(exc.problems or [str(exc)]) from None
    except RecursionError:
        raise SnapshotUploadError("snapshot is nested too deeply to read") from None
    except Exception as exc:  # a loader bug must not become a 500 for a user's file
        log.exception("snapshot loader failed")
        raise SnapshotUploadError(f"could not read the snapshot: {exc}") from None


@dataclass(frozen=True, slots=True)
class StoredForms:
    """What an upload stores of its content: the documents' hash (``canonical_documents``),
    the documents and the files, each compressed, and the documents' index."""

    content_hash: str
    documents_blob: bytes
    files_blob: bytes
    object_index: dict[str, list[list]]


# From this size on, the typed snapshot is built from yaml-rs' objects as read while a forked
# child asks yaml-rs' verdicts and writes the stored forms (10 MB: the request 1.0 -> 0.88 s for
# the forms, 0.88 -> 0.82 s for the verdicts); below it, forking costs more than it saves. The
# child is a shortcut: late, failed or not possible, the request asks and writes them itself.
_FORMS_ASIDE_FROM = 1 << 20
_FORMS_ASIDE_TIMEOUT = 60.0


def _parsed(files: Sequence[tuple[str, bytes | str]]) -> tuple[LoadedSnapshot, StoredForms]:
    """The allocator's typed snapshot of an upload (every failure a SnapshotUploadError,
    400) and the forms to store (``_built_beside`` from 1 MiB on)."""
    texts = _checked_texts(files)
    with _loader_errors():
        if sum(len(content) for _, content in texts) < _FORMS_ASIDE_FROM:
            loaded = snapshot_loader.load_decoded(snapshot_loader.decode_files(texts))
            forms = None
        else:
            decoded = snapshot_loader.decode_files(texts, check=False)
            loaded, forms = _built_beside(decoded, texts)
    if forms is None:
        forms = _stored_forms(loaded, texts)
    return loaded, forms


def _built_beside(
    decoded: snapshot_loader.Decoded, texts: Sequence[tuple[str, bytes]]
) -> tuple[LoadedSnapshot, StoredForms | None]:
    """The snapshot of files decoded without yaml-rs' verdicts, and the forms a child wrote
    (None: the request writes them). While the snapshot is built from the objects as read,
    the child asks the verdicts and, when they hold and every document is kept as decoded
    (the common case), writes the forms. A verdict that does not hold settles the files
    (read by PyYAML or held to the bounds, as a plain load does) and builds them again; a
    build that failed before the verdicts fails only if they hold."""
    if decoded.refused:  # no child: every file's problems, in order, as a plain load gives
        return snapshot_loader.load_decoded(decoded.settled()), None
    objects = decoded.objects
    with forked.fork_aside(partial(_forms_beside, decoded, texts)) or nullcontext() as aside:
        failure = None
        try:
            loaded = snapshot_loader.load_decoded(decoded, unchecked=True)
        except Exception as exc:  # may be the objects the verdicts refuse: asked below
            failure = exc
        answer = aside.result(_FORMS_ASIDE_TIMEOUT) if aside is not None else None
    within, forms = answer if answer is not None else (decoded.within(), None)
    if not within:
        return snapshot_loader.load_decoded(decoded.settled()), None
    if failure is not None:
        raise failure
    if forms is not None and not _kept_as_decoded(loaded, objects):
        forms = None
    return loaded, forms


def _forms_beside(
    decoded: snapshot_loader.Decoded, texts: Sequence[tuple[str, bytes]]
) -> tuple[bool, StoredForms | None]:
    """In the child: whether yaml-rs' verdicts hold (``Decoded.within``) and, if they do,
    the stored forms of the objects as decoded (``_forms_as_decoded``)."""
    if not decoded.within():
        return False, None
    return True, _forms_as_decoded(decoded.objects, texts)


def _kept_as_decoded(loaded: LoadedSnapshot, objects: list) -> bool:
    """Whether the snapshot's documents are the decoded objects, all of them, in order (none
    skipped, converted or replaced), each under its own kind."""
    documents = loaded.documents
    return len(documents) == len(objects) and all(
        document is raw.obj and kind == raw.obj.get("kind")
        for (kind, document), raw in zip(documents, objects, strict=True)
    )


def _forms_as_decoded(objects: list, texts: Sequence[tuple[str, bytes]]) -> StoredForms | None:
    """The stored forms if every decoded object is kept as decoded (``_kept_as_decoded``);
    None when a document needs ``canonical``'s careful reading."""
    documents = [(raw.obj.get("kind"), raw.obj) for raw in objects]
    written = blobs.canonical_all([[kind, document] for kind, document in documents])
    if written is None:
        return None
    return _forms(documents, _hashed(*written), texts)


def _stored_forms(loaded: LoadedSnapshot, texts: Sequence[tuple[str, bytes]]) -> StoredForms:
    return _forms(loaded.documents, canonical_documents(loaded), texts)


def _forms(
    documents: Sequence[tuple[str, dict]],
    hashed: tuple[str, bytes],
    texts: Sequence[tuple[str, bytes]],
) -> StoredForms:
    """The forms of ``documents``, given their hash and canonical JSON (``_hashed``)."""
    digest, array = hashed
    files = [{"name": name, "content": content.decode("utf-8")} for name, content in texts]
    return StoredForms(
        digest, zlib.compress(array, 1), blobs.pack(files, level=1), object_index(documents)
    )


def _label(kind: str, raw: dict) -> str:
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    namespace, name = meta.get("namespace"), meta.get("name")
    ident = f"{namespace}/{name}" if namespace else str(name or "<unnamed>")
    return f"{kind} {ident!r}"


def canonical_documents(loaded: LoadedSnapshot) -> tuple[str, bytes]:
    """(sha256 of the documents in canonical JSON, the JSON array of them) in one pass.

    The array is what ``documents_blob`` stores, so hashing and storing serialise once. A
    document no database can store is refused here, naming it (a NUL or lone surrogate in a
    string, a YAML value JSON has no form for).
    """
    written = blobs.canonical_all([[kind, raw] for kind, raw in loaded.documents])
    if written is None:  # one needs the careful reading, and a refusal names it
        parts = _canonical_one_by_one(loaded)
        return _hashed(parts, b"[" + b",".join(parts) + b"]")
    return _hashed(*written)


def _hashed(parts: list[bytes], array: bytes) -> tuple[str, bytes]:
    # Each document's bytes and a newline, hashed at once (24,000 updates cost twice as much).
    digest = hashlib.sha256(b"\n".join(parts) + b"\n") if parts else hashlib.sha256()
    return digest.hexdigest(), array


def _canonical_one_by_one(loaded: LoadedSnapshot) -> list[bytes]:
    parts: list[bytes] = []
    for index, (kind, raw) in enumerate(loaded.documents, 1):
        try:
            data = blobs.canonical([kind, raw])
        except blobs.UnstorableText as exc:
            raise SnapshotUploadError(f"object {index} ({_label(kind, raw)}): {exc}") from None
        except RecursionError:
            raise SnapshotUploadError(
                f"object {index} ({_label(kind, raw)}): nested too deeply"
            ) from None
        except (TypeError, ValueError) as exc:
            raise SnapshotUploadError(
                f"object {index} ({_label(kind, raw)}): holds a value JSON cannot represent "
                f"(a YAML binary, set or timestamp tag?): {exc}"
            ) from None
        parts.append(data)
    return parts


def content_hash(loaded: LoadedSnapshot) -> str:
    return canonical_documents(loaded)[0]


def _check_text(what: str, value: str) -> None:
    try:
        blobs.check_storable(value)
    except blobs.UnstorableText as exc:
        raise SnapshotUploadError(f"{what}: {exc}") from None


def object_index(documents: Sequence[tuple[str, dict]]) -> dict[str, list[list]]:
    index: dict[str, list[list]] = {}
    for kind, raw in documents:
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        index.setdefault(kind, []).append([meta.get("namespace"), str(meta.get("name") or "")])
    return index


def files_hash(files: Sequence[tuple[str, bytes | str]]) -> str:
    digest = hashlib.sha256()
    for name, content in files:
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(_as_bytes(content)).digest())
    return digest.hexdigest()


def _default_name(file_names: Sequence[str]) -> str:
    name = ", ".join(file_names) or "snapshot"
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def create_snapshot(
    owner,
    files: Sequence[tuple[str, bytes | str]],
    name: str | None = None,
    *,
    source: str = Snapshot.SOURCE_UPLOAD,
    extra_warnings: Iterable[str] = (),
    kubernetes_version: str = "",
) -> Snapshot:
    """Parse and store an upload; the owner's identical earlier upload is returned instead.

    The returned object carries ``existing`` (True when it was already stored).
    """
    with collector_paused():
        return _create_snapshot(
            owner,
            files,
            name,
            source=source,
            extra_warnings=extra_warnings,
            kubernetes_version=kubernetes_version,
        )


def _create_snapshot(
    owner,
    files: Sequence[tuple[str, bytes | str]],
    name: str | None,
    *,
    source: str,
    extra_warnings: Iterable[str],
    kubernetes_version: str,
) -> Snapshot:
    for fname, _ in files:
        _check_text("file name", fname)
    if name:
        _check_text("name", name)
    raw_digest = files_hash(files)
    same_files = (
        Snapshot.objects.filter(owner=owner, files_hash=raw_digest)
        .order_by("created", "id")
        .first()
    )
    if same_files is not None and files:
        _check_size([(n, _as_bytes(c)) for n, c in files])
        same_files.existing = True
        return same_files
    loaded, forms = _parsed(files)
    digest = forms.content_hash
    existing = (
        Snapshot.objects.filter(owner=owner, content_hash=digest).order_by("created", "id").first()
    )
    if existing is not None:
        existing.existing = True
        return existing
    warnings = list(loaded.warnings) + [w for w in extra_warnings if w]
    file_names = [fname for fname, _ in files]
    return _stored(
        name=(name or "").strip()[:MAX_NAME] or _default_name(file_names),
        owner=owner,
        source=source,
        content_hash=digest,
        files_hash=raw_digest,
        files_blob=forms.files_blob,
        documents_blob=forms.documents_blob,
        object_counts=loaded.object_counts(),
        object_index=forms.object_index,
        warnings=warnings,
        unsimulated=list(loaded.unsimulated),
        kubernetes_version=kubernetes_version[:64],
        size_bytes=sum(len(_as_bytes(c)) for _, c in files),
        file_names=file_names,
    )


def _stored(**fields) -> Snapshot:
    """Snapshot.objects.create; when the same owner stored the same content concurrently
    (unique on owner and content_hash), the first one stored wins and is this one
    (``existing`` True)."""
    try:
        with transaction.atomic():
            snap = Snapshot.objects.create(**fields)
    except IntegrityError:
        existing = Snapshot.objects.filter(
            owner=fields["owner"], content_hash=fields["content_hash"]
        ).first()
        if existing is None:
            raise
        existing.existing = True
        return existing
    snap.existing = False
    return snap


def load_snapshot(snapshot: Snapshot) -> LoadedSnapshot:
    """The allocator's typed snapshot, built from the decoded documents stored at upload (no
    YAML parse again); the stored files are the fallback for documents that do not load."""
    try:
        # Decoding the stored documents makes millions of objects: collecting resumes once,
        # after the build (between the two, it walked every document).
        with collector_paused():
            loaded = snapshot_loader.load_documents(snapshot.documents())
        # Skipped documents (unknown kinds) are not stored: their warnings are, with the
        # snapshot, and the result reports them as a run on the files would.
        loaded.warnings[:0] = list(snapshot.warnings or [])
        return loaded
    except snapshot_loader.SnapshotError:
        log.warning("snapshot %s: stored documents did not load, re-parsing its files", snapshot.pk)
        return snapshot_loader.load_files(
            [(name, content.encode("utf-8")) for name, content in snapshot.files()]
        )


def catalog_file(
    region: str, families: Sequence[str] | None = None, *, mig: bool = True
) -> tuple[str, bytes]:
    """The AWS catalog's InstanceType documents for ``region`` as one YAML file of an upload."""
    try:
        docs = aws_catalog.instance_types(region, families, aws_catalog.CatalogOptions(mig=mig))
    except aws_catalog.CatalogError as exc:
        raise SnapshotUploadError(f"catalog: {exc}") from None
    text = to_yaml(docs, aws_catalog.yaml_header(region, len(docs)))
    return f"catalog-aws-{region}.yaml", text.encode("utf-8")


def import_cluster(
    owner,
    kubeconfig: str | dict,
    *,
    context: str | None = None,
    name: str | None = None,
    instance_type_files: Sequence[tuple[str, bytes | str]] = (),
    allow_local_files: bool = False,
    catalog: bool = True,
    region: str | None = None,
) -> Snapshot:
    """List every snapshot kind from a live cluster and store it as a snapshot.

    Without instance type files, the AWS catalog's instance types that the cluster's NodePools
    allow (and those of its nodes' families) are added when ``catalog`` is on
    (``kube_import.catalog_for``); ``region`` overrides the one read from the nodes."""
    from dra_web.snapshots import kube_import

    try:
        listing = kube_import.list_cluster(
            kubeconfig, context=context, allow_local_files=allow_local_files
        )
    except kube_import.KubeImportError as exc:
        raise SnapshotUploadError(str(exc)) from None
    if region and region not in aws_catalog.regions():
        raise SnapshotUploadError(
            f"region: unknown region {region!r}: the catalog knows {', '.join(aws_catalog.regions())}"
        )
    files: list[tuple[str, bytes | str]] = [(listing.file_name, listing.as_json_bytes())]
    files.extend(instance_type_files)
    warnings = list(listing.warnings)
    wants_catalog = catalog and not instance_type_files
    paired = kube_import.catalog_for(listing, region=region) if wants_catalog else None
    if paired is not None:
        warnings.extend(f"InstanceType: {note}" for note in paired.notes)
        if paired.file is not None:
            files.append(paired.file)
    if not instance_type_files and (paired is None or paired.file is None):
        warnings.append(
            "InstanceType: the cloud provider's instance types cannot be listed from a cluster; "
            "add an instance type file (dra-web.io/v1alpha1 InstanceType or Karpenter's "
            "instance_types.json) so that new NodeClaims can be simulated"
        )
    warnings.extend(_version_warnings(listing.server_version))
    return create_snapshot(
        owner,
        files,
        name or f"cluster {listing.context}",
        source=Snapshot.SOURCE_IMPORT,
        extra_warnings=warnings,
        kubernetes_version=listing.server_version,
    )


def _version_warnings(server_version: str) -> list[str]:
    """A server whose release has no feature gate preset: its runs keep every gate on."""
    from allocator.featuregates import KUBERNETES_VERSIONS, release_of

    if not server_version or release_of(server_version) in KUBERNETES_VERSIONS:
        return []
    return [
        f"server version {server_version}: no feature gate preset for it (presets: "
        f"{', '.join(KUBERNETES_VERSIONS)}); its runs use every feature gate unless a "
        "Kubernetes version is chosen"
    ]


def delete_snapshot(snapshot: Snapshot, user) -> None:
    if snapshot.owner_id != user.pk and not user.is_superuser:
        raise PermissionDenied("only the owner can delete this snapshot")
    snapshot.delete()


# --- what-if variants --------------------------------------------------------------------------

MAX_EDITS = 50


def create_variant(owner, parent: Snapshot, edits: object, name: str | None = None) -> Snapshot:
    """A snapshot derived from ``parent`` by ``edits`` (allocator/edits.py ``apply_edits``),
    its parent and edits recorded, ``owner`` its author. The same resulting content as one of
    the owner's snapshots is that snapshot (``existing``). A patch that does not apply, or a
    result the loader refuses, is a SnapshotUploadError naming the edit (400)."""
    from allocator.edits import EditError, apply_edits

    if not isinstance(edits, list) or not edits:
        raise SnapshotUploadError("edits: a non-empty list of {object, patch} edits")
    if len(edits) > MAX_EDITS:
        raise SnapshotUploadError(f"edits: at most {MAX_EDITS} edits")
    try:
        snapshot_loader.check_document(edits, "edits")
        documents = apply_edits(parent.documents(), edits)
    except EditError as exc:
        raise SnapshotUploadError(str(exc)) from None
    except snapshot_loader.SnapshotError as exc:
        raise SnapshotUploadError(exc.problems or [str(exc)]) from None
    try:
        loaded = snapshot_loader.load_documents(documents, file="what-if")
    except snapshot_loader.SnapshotError as exc:
        raise SnapshotUploadError(
            [f"the edited snapshot does not load: {p}" for p in (exc.problems or [str(exc)])]
        ) from None
    loaded.warnings[:0] = list(parent.warnings or [])
    digest, documents_json = canonical_documents(loaded)
    existing = (
        Snapshot.objects.filter(owner=owner, content_hash=digest).order_by("created", "id").first()
    )
    if existing is not None:
        existing.existing = True
        return existing
    if name:
        _check_text("name", name)
    label = (name or "").strip()[:MAX_NAME] or _variant_name(parent, edits)
    # The files of a what-if are its documents as one JSON List: a run that cannot use the
    # stored documents reads them back the same.
    items = ",".join(blobs.canonical(raw).decode("utf-8") for _, raw in documents)
    text = '{"apiVersion":"v1","kind":"List","items":[' + items + "]}"
    return _stored(
        name=label,
        owner=owner,
        source=Snapshot.SOURCE_VARIANT,
        content_hash=digest,
        files_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        files_blob=blobs.pack([{"name": "what-if.json", "content": text}], level=1),
        documents_blob=zlib.compress(documents_json, 1),
        object_counts=loaded.object_counts(),
        object_index=object_index(loaded.documents),
        warnings=list(loaded.warnings),
        unsimulated=list(loaded.unsimulated),
        kubernetes_version=parent.kubernetes_version,
        size_bytes=len(text.encode("utf-8")),
        file_names=["what-if.json"],
        parent=parent,
        edits=edits,
    )


def _variant_name(parent: Snapshot, edits: list) -> str:
    objects = sorted({str(e.get("object")) for e in edits if isinstance(e, dict)})
    shown = ", ".join(objects[:2]) + (f" and {len(objects) - 2} more" if len(objects) > 2 else "")
    name = f"{parent.name} · what-if: {shown}"
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"
