"""The cycle collector around a snapshot's load and a simulation.

A run holds its snapshot (millions of objects for 5,000 nodes) to its end and allocates
briskly; it makes almost no reference cycles (a finished device search is freed by reference
counting: ``DFSContext.release``). With the default thresholds the collector walks the
whole graph again and again: ``existing`` took 4.4 s in a web worker against 1.9 s with the
thresholds below. Peak memory does not grow measurably (bench/scale_bench.py prints it).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

RUN_THRESHOLDS = (50_000, 50, 50)


def tune_for_one_run() -> None:
    """For a process that runs one simulation and ends (``python -m allocator``)."""
    gc.set_threshold(*RUN_THRESHOLDS)


@contextmanager
def collector_for_a_run() -> Iterator[Callable[[], None]]:
    """For a run inside a longer-lived process (a worker): the thresholds raised until the
    block ends, then put back. Yields ``keep``: called once the snapshot is loaded, it
    freezes what is alive (``gc.freeze``) so the collector never walks the snapshot during
    the run; the block's end unfreezes it."""
    previous = gc.get_threshold()
    frozen = False

    def keep() -> None:
        nonlocal frozen
        gc.freeze()
        frozen = True

    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield keep
    finally:
        gc.set_threshold(*previous)
        if frozen:
            gc.unfreeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while a snapshot is decoded, built (and, by the web service,
    stored): millions of objects and no reference cycles (self-referring YAML aliases are
    refused), so its passes over them are pure cost, about a fifth of a 10 MB load and a third
    of building a stored 1,000-node snapshot again. Nested pauses keep it off to the outer
    one's end; the objects are freed by reference counting before collecting resumes."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
