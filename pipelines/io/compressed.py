"""Reading (possibly compressed) input files in bounded chunks, loudly on damage. Beam-free:
files are opened through the `Reader` the caller passes (a Beam stage passes Beam's, so its
filesystem flags apply; tools pass `pipelines.io.storage.READER`).

Why not Beam's `FileSystems.open(path)` with automatic decompression: for a truncated .gz it
returns the readable part and no error, which is silent data loss; and it cannot start at a
byte offset inside a multistream .bz2. Here `.bz2` (any number of concatenated streams) and
`.gz` (any number of members) are decompressed by hand, and a file that ends inside a stream
or holds corrupt data raises `InputReadError` with the compressed byte offset, after every
byte before the fault has been yielded. For corrupt data that offset is the start of the
stream (or member) that failed, and the message says which one it is and the byte before
which the fault lies: a multistream dump holds hundreds of thousands of streams, and the
decompressor cannot say more exactly where inside one it went wrong.
"""

from __future__ import annotations

import bz2
import itertools
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from pipelines.io.storage import Reader

# 1 MiB reads keep memory flat and amortise Python overhead; one bz2 block is ≤ 900 kB.
CHUNK_BYTES = 1 << 20


class InputReadError(Exception):
    """An input file could not be read to its end. Everything before the fault was yielded."""

    def __init__(
        self, path: str, position: str, error: str, reason: str, offset: int | None = None
    ) -> None:
        super().__init__(f"{path}: {error} at {position}")
        self.path = path
        self.position = position
        self.error = error
        self.reason = reason  # a stable code: truncated_input, corrupt_input, bad_index, …
        self.offset = offset  # compressed byte the position names, when it names one


class Position:
    """Compressed byte offset reached so far, for error messages."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset


def decompressed_chunks(
    reader: Reader,
    path: str,
    start: int = 0,
    end: int | None = None,
    position: Position | None = None,
) -> Iterator[bytes]:
    """Bytes [start, end) of `path`, decompressed by suffix, in chunks of bounded size."""
    position = position if position is not None else Position(start)
    remaining = None if end is None else end - start
    with reader.open(path) as handle:  # the stored bytes: we decompress them ourselves
        if start:
            handle.seek(start)
        raw_chunks = _raw_chunks(handle, remaining, position)
        if path.endswith(".bz2"):
            yield from _bunzip_streams(raw_chunks, position, path, start)
        elif path.endswith(".gz"):
            yield from _gunzip_members(raw_chunks, position, path)
        else:
            yield from raw_chunks


@dataclass(frozen=True)
class LongLine:
    """A line longer than the caller's limit: measured while it streams past, never held."""

    length: int  # bytes, without the b"\\n"
    head: bytes  # its first bytes, for a message

    HEAD_BYTES = 60


def lines(chunks: Iterator[bytes], max_bytes: int) -> Iterator[bytes | LongLine]:
    """Split byte chunks into lines (without the b"\\n"); a line over `max_bytes` is a LongLine.

    Memory stays bounded by `max_bytes` plus one chunk whatever the input: the bytes of an
    over-long line are counted and dropped as they arrive (a 256 MiB line costs nothing),
    so the caller decides what a LongLine means (a reject, a bad index) and reads on.
    """
    pending: list[bytes] = []  # the start of a line that goes on in a later chunk
    pending_bytes = 0
    skipped: int | None = None  # bytes of an over-long line so far, while skipping it
    head = b""
    for chunk in chunks:
        *ended, rest = chunk.split(b"\n")
        for part in ended:  # each ends a line
            if skipped is None and not pending and len(part) <= max_bytes:
                yield part  # the common case: a whole line inside one chunk
                continue
            length = (pending_bytes if skipped is None else skipped) + len(part)
            if length <= max_bytes:
                yield b"".join([*pending, part])
            else:
                if skipped is None:
                    head = b"".join([*pending, part[: LongLine.HEAD_BYTES]])
                yield LongLine(length, head[: LongLine.HEAD_BYTES])
            pending, pending_bytes, skipped = [], 0, None
        if skipped is not None:
            skipped += len(rest)
        elif pending_bytes + len(rest) > max_bytes:
            head = b"".join([*pending, rest[: LongLine.HEAD_BYTES]])
            skipped = pending_bytes + len(rest)
            pending, pending_bytes = [], 0
        elif rest:
            pending.append(rest)
            pending_bytes += len(rest)
    if skipped is not None:
        yield LongLine(skipped, head[: LongLine.HEAD_BYTES])
    elif pending:
        yield b"".join(pending)


def _raw_chunks(handle: BinaryIO, remaining: int | None, position: Position) -> Iterator[bytes]:
    while remaining is None or remaining > 0:
        size = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
        chunk = handle.read(size)
        if not chunk:
            return
        if remaining is not None:
            remaining -= len(chunk)
        yield chunk
        position.offset += len(chunk)


def _bunzip_streams(
    raw_chunks: Iterator[bytes], position: Position, path: str, start: int
) -> Iterator[bytes]:
    """Decompress concatenated bz2 streams (multistream dumps hold hundreds of thousands)."""
    first = next(raw_chunks, b"")
    if first and not first.startswith(b"BZh"):
        raise InputReadError(
            path,
            f"byte {start}",
            "no bz2 stream starts here (is the index for this file?)",
            "bad_index" if start else "corrupt_input",
            start,
        )
    chunks = itertools.chain([first], raw_chunks)
    yield from _decompress_concatenated(chunks, position, path, bz2.BZ2Decompressor, "bz2")


def _gunzip_members(raw_chunks: Iterator[bytes], position: Position, path: str) -> Iterator[bytes]:
    def new_decompressor():
        return zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or zlib header

    yield from _decompress_concatenated(raw_chunks, position, path, new_decompressor, "gzip")


def _decompress_concatenated(
    raw_chunks: Iterator[bytes], position: Position, path: str, new_decompressor, kind: str
) -> Iterator[bytes]:
    """Decompress back-to-back streams (bz2) or members (gzip); raise on corrupt or cut data.

    No call produces more than CHUNK_BYTES: a few hundred compressed bytes can stand for
    gigabytes (a "decompression bomb"), and memory must stay bounded whatever the input.
    A corrupt stream is named by its number and the compressed byte where it starts (the
    bytes after an ended stream are the next one's, so each start is exact).
    """
    decompressor = new_decompressor()
    in_stream = False
    stream_number, stream_start = 1, position.offset
    for chunk in raw_chunks:
        chunk_end = position.offset + len(chunk)  # position.offset: where this chunk starts
        data = chunk
        while True:
            try:
                out = decompressor.decompress(data, CHUNK_BYTES)
            except (OSError, zlib.error) as err:  # bz2: "Invalid data stream"
                where = (
                    f"compressed byte {stream_start} ({kind} stream {stream_number} starts "
                    f"there; the fault lies before byte {chunk_end})"
                )
                raise InputReadError(
                    path, where, f"corrupt {kind} data ({err})", "corrupt_input", stream_start
                ) from err
            in_stream = True
            if out:
                yield out
            if decompressor.eof:
                data = decompressor.unused_data
                decompressor = new_decompressor()
                in_stream = False
                stream_number += 1
                stream_start = chunk_end - len(data)  # unused_data: this chunk's last bytes
                if not data:
                    break
                continue
            # Input held back by the output limit: zlib hands it back, bz2 keeps it inside.
            data = getattr(decompressor, "unconsumed_tail", b"")
            if not data and getattr(decompressor, "needs_input", True):
                break
    if in_stream:
        raise InputReadError(
            path,
            f"compressed byte {position.offset}",
            f"the {kind} data ends inside a stream (the file is truncated)",
            "truncated_input",
            position.offset,
        )
