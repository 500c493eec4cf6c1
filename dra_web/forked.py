"""A value computed beside the caller, on another core, by a forked child.

The child reads what the parent held when it forked (copy on write: nothing is sent to it)
and sends its value back pickled through a pipe, while the parent goes on with Python-bound
work of its own (an upload builds its typed snapshot meanwhile: see
``snapshots.services``). It is a shortcut only: where forking is not possible, or the child
fails, dies or is late, ``result`` is None and the caller computes the value itself.
"""

from __future__ import annotations

import os
import pickle
import select
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from allocator import forking

_CHUNK = 1 << 20


class Forked:
    """A child computing a value; ``result`` reads it once, ``close`` (or the block's end)
    stops and reaps the child whatever happened."""

    __slots__ = ("_child",)

    def __init__(self, child: forking.Child) -> None:
        self._child = child

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def result(self, timeout: float) -> Any | None:
        """The child's value; None when it failed, died, or took longer than ``timeout``
        seconds (it is then stopped)."""
        child = self._child
        if child.pid is None:
            return None
        chunks = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([child.fd], [], [], left)[0]:
                    return None
                chunk = os.read(child.fd, _CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            self.close()
        try:
            return pickle.loads(b"".join(chunks)) if chunks else None
        except Exception:  # a child cut short: a truncated value is no value
            return None

    def close(self) -> None:
        self._child.stop()


def fork_aside(compute: Callable[[], Any]) -> Forked | None:
    """``compute()`` run in a forked child; None where no child could be forked."""
    child = forking.fork_writer(partial(_write_value, compute))
    return Forked(child) if child is not None else None


def _write_value(compute: Callable[[], Any], fd: int) -> None:
    forking.write_all(fd, pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL))
