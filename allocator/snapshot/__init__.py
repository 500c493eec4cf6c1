"""The cluster snapshot loader (CONTRACT section 1).

``load_files`` / ``load_paths`` read every accepted encoding and kind into
``allocator.model.Snapshot``; ``SnapshotError.problems`` lists every problem of a load, each as
``FILE doc N Kind namespace/name: field.path: message`` (N counts the objects of the file from
1, Lists flattened).
"""

from allocator.snapshot.loader import (
    KINDS,
    SnapshotError,
    load_documents,
    load_files,
    load_paths,
)

__all__ = ["KINDS", "SnapshotError", "load_documents", "load_files", "load_paths"]
