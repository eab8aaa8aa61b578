"""bz2 decompressed by indexed_bzip2's decoder on one thread, which spends less CPU per byte
than Python's `bz2` module (docs/benchmarks.md, Extraction). Beam-free, used by
`pipelines.io.compressed` for `.bz2` files it can seek in.

That decoder is trusted only with what it can vouch for: `decompress_span` yields what it
decodes, and raises `Unverified` when it stops on a fault (truncated or corrupt data) or
cannot show that the span's last byte ends a stream (it passes over bytes after a stream
that do not start another, where Python's decoder raises). The caller then reads the span
again with Python's decoder, whose faults name the stream and compressed byte: the messages,
positions and bytes before a fault stay what they were.

The decoder reads the span through `_Span`, a view of the caller's handle that has no file
descriptor, so every byte it sees comes through Python (local files, s3://, gs://, a split
of a multistream dump alike). A decoder that reads through Python must be closed before the
interpreter finalizes (it aborts the process otherwise): the generator closes it on every
exit, and an `atexit` hook closes any that a suspended, never-finished generator still holds.
"""

from __future__ import annotations

import atexit
import io
import weakref
from collections.abc import Iterator
from typing import BinaryIO

import indexed_bzip2

# A bz2 stream ends with this 48-bit marker, its 32-bit CRC, and 0-7 bits of padding up to a
# byte boundary; its last 11 bytes (88 bits) always hold the marker.
_STREAM_END_MAGIC = 0x177245385090
_STREAM_END_TAIL_BYTES = 11

# Decoders still open: closed at exit if a generator holding one was never finished.
_OPEN_DECODERS: weakref.WeakSet = weakref.WeakSet()


class Unverified(Exception):
    """The fast decoder cannot vouch for the span: Python's decoder must read it again."""


def decompress_span(
    handle: BinaryIO, start: int, end: int | None, chunk_bytes: int, head: bytes = b""
) -> Iterator[bytes]:
    """Decompressed bytes of `handle`'s bytes [start, end) (to its end when `end` is None),
    in pieces of at most `chunk_bytes`; `Unverified` after the last good piece on a fault.
    `head`: the span's first bytes, already read from `handle` (which stands after them):
    every byte of the span is read from the handle once (a counting handle counts the
    file's size), bar what the decoder itself reads twice."""
    span = _Span(handle, start, end, head)
    try:
        # The unbuffered reader: each read is one bytes object, and no 1 MiB buffer besides.
        decoder = indexed_bzip2.IndexedBzip2FileRaw(span, parallelization=1)
    except Exception as err:  # its faults come as RuntimeError or ValueError
        raise Unverified(f"the decoder refused the data ({err})") from err
    _OPEN_DECODERS.add(decoder)
    try:
        while True:
            try:
                out = decoder.read(chunk_bytes)
            except Exception as err:  # a fault, or the handle's own error: both re-read
                raise Unverified(str(err)) from err
            if not out:
                break
            yield out
        # It stops quietly at bytes after a stream that start no other (and warns on
        # stderr): only a span read to its last bit, which ends a stream, is whole.
        read_bits = decoder.bz2reader.tell_compressed()
        if read_bits != 8 * span.size or not _ends_a_stream(span):
            raise Unverified("the span does not end where its last stream ends")
    finally:
        _OPEN_DECODERS.discard(decoder)
        decoder.close()


def _ends_a_stream(span: _Span) -> bool:
    """Whether the span's last bytes are a stream's end marker, CRC and padding (as the
    decoder was served them, when it read them all)."""
    tail_bytes = min(_STREAM_END_TAIL_BYTES, span.size)
    last = span.tail if len(span.tail) == tail_bytes else b""
    if not last:
        span.seek(-tail_bytes, io.SEEK_END)
        last = span.read(tail_bytes)
    tail = int.from_bytes(last, "big")
    marker = (1 << 48) - 1
    return any((tail >> (32 + pad)) & marker == _STREAM_END_MAGIC for pad in range(8))


@atexit.register
def _close_open_decoders() -> None:
    for decoder in list(_OPEN_DECODERS):
        decoder.close()


class _Span(io.RawIOBase):
    """Bytes [start, end) of a seekable handle, seen as a whole file. It has no `fileno`, so
    the decoder reads through `read` (bounded by the span), never the descriptor itself;
    `close` leaves the handle to its owner."""

    def __init__(self, handle: BinaryIO, start: int, end: int | None, head: bytes = b"") -> None:
        super().__init__()
        self._handle = handle
        self._start = start
        self._head = head  # the span's first bytes, read before: served from here
        at = handle.tell()
        stop = handle.seek(0, io.SEEK_END) if end is None else end
        handle.seek(at)
        self.size = max(stop - start, 0)
        self._at = 0  # the decoder's position in the span
        self._handle_at = at  # where the handle stands (in the file)
        self.tail = b""  # the span's last bytes, once the decoder has read them
        self._recent, self._recent_end = b"", -1

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = (0, self._at, self.size)[whence]
        self._at = max(base + offset, 0)
        return self._at

    def read(self, size: int | None = -1) -> bytes:
        left = self.size - self._at
        count = left if size is None or size < 0 else min(size, left)
        if count <= 0:
            return b""
        begin = self._at
        if self._at < len(self._head):
            data = self._head[self._at : self._at + count]
        else:
            where = self._start + self._at
            if where != self._handle_at:
                self._handle.seek(where)
            data = self._handle.read(count)
            self._handle_at = where + len(data)
        self._at += len(data)
        # The last bytes served in one run of reads, kept for the end-of-stream check.
        run = self._recent if begin == self._recent_end else b""
        self._recent, self._recent_end = (run + data)[-_STREAM_END_TAIL_BYTES:], self._at
        if self._at == self.size:
            self.tail = self._recent
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
