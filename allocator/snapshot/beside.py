"""A long YAML stream read by a second process while this one builds the snapshot.

yaml-rs' parse, the text scans and the verdict of a 16 MB stream take as long as building
its objects. A forked reader takes the stream's pieces (``decode.stream_pieces``) one after
another and sends each piece's objects (``decode.read_piece``) down a pipe, marshalled; the
caller builds each piece while the next is read. The objects, and their numbers, are those
``decode.decode_file`` gives. When a piece's reading does not stand (PyYAML must read the
stream, a bound may be broken, yaml-rs refuses it) or the reader fails, iterating raises
``ReadWhole``: the caller decodes the file the usual way, which also words any problem.

For a process that runs one load and nothing beside it (the command line): it forks.
"""

from __future__ import annotations

import marshal
import os
import select
from collections.abc import Iterator
from functools import partial

from allocator.forking import Child, fork_writer, write_all
from allocator.snapshot.decode import RawObject, read_piece, stream_pieces

# Pieces of about this many characters: the first reaches the builder after some 20 ms; a
# stream shorter than two pieces is read in this process.
PIECE_CHARS = 256 * 1024
_LENGTH_BYTES = 8
# A pipe that holds a few pieces' objects: the reader goes on while the builder builds (a
# 64 kB pipe held it to one piece ahead).
_PIPE_BYTES = 1 << 20


class ReadWhole(Exception):
    """The file must be decoded whole (``decode.decode_file``)."""


def pieces_of(content: bytes | str) -> list[str] | None:
    """The pieces a reader would take, or None when the file is read in this process."""
    if not hasattr(os, "fork"):
        return None
    return stream_pieces(content, PIECE_CHARS)


def read_beside(name: str, pieces: list[str]) -> Iterator[RawObject]:
    """The objects of ``pieces`` (``pieces_of``), numbered from 1 as in their file; raises
    ``ReadWhole`` where a piece's reading does not stand. A forked reader reads the pieces
    from the first on; whenever its next piece is not ready, this process reads one from the
    last back itself instead of waiting, so the two meet wherever their speeds put them. The
    reader is stopped and reaped when the iteration ends, however it ends."""
    reader = fork_writer(partial(_read, pieces), _PIPE_BYTES)
    if reader is None:
        raise ReadWhole  # no process could be forked
    index = 0
    try:
        received, back = 0, len(pieces)
        own: list[list] = []  # the pieces read here, the last first
        while received < back:
            if received < back - 1 and not _ready(reader):
                back -= 1
                own.append(_stands(read_piece(pieces[back])))
                continue
            for obj in _received(reader):
                index += 1
                yield RawObject(name, index, obj)
            received += 1
        reader.stop()  # what it reads now, this process has read
        for objects in reversed(own):
            for obj in objects:
                index += 1
                yield RawObject(name, index, obj)
    finally:
        reader.stop()


def _stands(objects: list | None) -> list:
    if objects is None:
        raise ReadWhole
    return objects


def _ready(reader: Child) -> bool:
    return bool(select.select([reader.fd], [], [], 0)[0])


def _received(reader: Child) -> list:
    length = int.from_bytes(_read_exactly(reader.fd, _LENGTH_BYTES), "little")
    return _stands(marshal.loads(_read_exactly(reader.fd, length)) if length else None)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 22))
        if not chunk:
            raise ReadWhole  # the reader stopped
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read(pieces: list[str], fd: int) -> None:
    """The reader: each piece's objects, or an empty frame for a piece that does not stand
    (then nothing more); it goes on until stopped when the builder reads the last ones
    itself."""
    for piece in pieces:
        objects = read_piece(piece)
        payload = b"" if objects is None else marshal.dumps(objects)
        write_all(fd, len(payload).to_bytes(_LENGTH_BYTES, "little"))
        write_all(fd, payload)
        if objects is None:
            return
