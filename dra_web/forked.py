"""A value computed beside the caller, on another core, by a forked child.

The child reads what the parent held when it forked (copy on write: nothing is sent to it)
and sends its value back pickled through a pipe, while the parent goes on with Python-bound
work of its own (an upload builds its typed snapshot meanwhile: see
``snapshots.services``). It is a shortcut only: where forking is not possible, or the child
fails, dies or is late, ``result`` is None and the caller computes the value itself.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any

_CHUNK = 1 << 20


class Forked:
    """A child computing a value; ``result`` reads it once, ``close`` (or the block's end)
    stops and reaps the child whatever happened."""

    __slots__ = ("_pid", "_fd")

    def __init__(self, pid: int, fd: int) -> None:
        self._pid: int | None = pid
        self._fd = fd

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def result(self, timeout: float) -> Any | None:
        """The child's value; None when it failed, died, or took longer than ``timeout``
        seconds (it is then stopped)."""
        if self._pid is None:
            return None
        chunks = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                    return None
                chunk = os.read(self._fd, _CHUNK)
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
        if self._pid is None:
            return
        pid, self._pid = self._pid, None
        os.close(self._fd)
        try:
            os.kill(pid, signal.SIGKILL)  # done already (a zombie) or not needed any more
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # reaped already (SIGCHLD ignored by the process)


def fork_aside(compute: Callable[[], Any]) -> Forked | None:
    """``compute()`` run in a forked child; None where no child could be forked."""
    if not hasattr(os, "fork"):
        return None
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # pragma: no cover - the child: its coverage is not collected
        _child(compute, read_fd, write_fd)
    os.close(write_fd)
    return Forked(pid, read_fd)


def _child(compute: Callable[[], Any], read_fd: int, write_fd: int) -> None:
    """Compute, write, and exit without returning into the parent's code or running its
    clean-up (``os._exit``): its database connections and files are the parent's."""
    code = 1
    try:
        os.close(read_fd)
        # A collection would write to (and so copy) every page of the parent's objects.
        gc.disable()
        data = memoryview(pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL))
        while data:
            data = data[os.write(write_fd, data) :]
        code = 0
    finally:
        os._exit(code)
