"""Compressed JSON blobs: how snapshots and traces are stored (zlib of compact UTF-8 JSON)."""

from __future__ import annotations

import json
import zlib
from typing import Any


def pack(value: Any, level: int = 6) -> bytes:
    return zlib.compress(
        json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), level
    )


def unpack(blob: bytes | memoryview | None) -> Any:
    if blob is None:
        return None
    return json.loads(zlib.decompress(bytes(blob)).decode("utf-8"))


def canonical(value: Any) -> bytes:
    """One byte form per JSON value (sorted keys, no spaces) for content hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )
