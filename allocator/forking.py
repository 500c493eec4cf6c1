"""Work handed to a forked child that writes what it finds into a pipe.

The one place that forks: the child reads what the parent held when it forked (copy on
write: nothing is sent to it), writes into the pipe, and leaves without returning into the
parent's code or running its clean-up (``os._exit``: the parent's files, database
connections and exit handlers are the parent's). Users: a long YAML stream read beside the
build (``allocator.snapshot.beside``), an upload's stored forms (``dra_web.forked``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import signal
from collections.abc import Callable
from typing import NoReturn


class Child:
    """A forked child and the read end of its pipe; ``stop`` closes the pipe and stops and
    reaps the child, whatever it is doing (once: later calls do nothing)."""

    __slots__ = ("pid", "fd")

    def __init__(self, pid: int, fd: int) -> None:
        self.pid: int | None = pid
        self.fd = fd

    def stop(self) -> None:
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        os.close(self.fd)
        try:
            os.kill(pid, signal.SIGKILL)  # done already (a zombie) or not needed any more
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # reaped already (SIGCHLD ignored by the process)


def fork_writer(write: Callable[[int], None], pipe_bytes: int | None = None) -> Child | None:
    """``write(fd)`` run in a forked child, ``fd`` the write end of a pipe whose read end the
    returned ``Child`` holds; None where no child could be forked. ``pipe_bytes``: a wider
    pipe, so the child can run ahead of a reader busy with its own work (where the system
    allows it; the narrow pipe works too)."""
    if not hasattr(os, "fork"):
        return None
    read_fd, write_fd = os.pipe()
    if pipe_bytes is not None:
        with contextlib.suppress(AttributeError, OSError):  # not Linux, or past pipe-max-size
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, pipe_bytes)
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:  # pragma: no cover - the child: its coverage is not collected
        _child(write, read_fd, write_fd)
    os.close(write_fd)
    return Child(pid, read_fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _child(write: Callable[[int], None], read_fd: int, write_fd: int) -> NoReturn:
    code = 1
    try:
        os.close(read_fd)
        # A collection would write to (and so copy) every page of the parent's objects.
        gc.disable()
        write(write_fd)
        code = 0
    finally:
        os._exit(code)
