"""The cluster snapshot loader (docs/SNAPSHOT.md).

``load_files`` / ``load_paths`` read every accepted encoding and kind into
``allocator.model.Snapshot``; ``SnapshotError.problems`` lists every problem of a load, each as
``FILE doc N Kind namespace/name: field.path: message`` (N counts the objects of the file from
1, Lists flattened). ``decode_files`` and ``load_decoded`` are ``load_files``' two halves, for
a caller with work of its own between them (the web upload, which also asks yaml-rs' verdicts
on another core while it builds: ``decode_files(check=False)``). Decoded documents are held
to the bounds of ``allocator.snapshot.bounds`` (``BoundError``, a ``SnapshotError`` naming
the bound); ``check_document`` applies them to a document decoded elsewhere (the web API's
JSON bodies).
"""

from allocator.collector import collector_paused
from allocator.snapshot.bounds import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    MAX_NUMBER_DIGITS,
    MAX_STRING_CHARS,
    check_document,
)
from allocator.snapshot.errors import BoundError, SnapshotError
from allocator.snapshot.loader import (
    KINDS,
    Decoded,
    decode_files,
    load_decoded,
    load_documents,
    load_files,
    load_paths,
)

__all__ = [
    "collector_paused",
    "KINDS",
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_NUMBER_DIGITS",
    "MAX_STRING_CHARS",
    "BoundError",
    "SnapshotError",
    "check_document",
    "Decoded",
    "decode_files",
    "load_decoded",
    "load_documents",
    "load_files",
    "load_paths",
]
