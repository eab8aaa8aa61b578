"""A Parquet column chunk's page sizes, read from its page headers (Beam-free, no pyarrow).

pyarrow decompresses a whole page (or a dictionary page) at once, however large its writer
made it: 100 KB of zstd can hold a 1 GB page. Before a row group is read, the headers of
each of its column chunks read are walked (`chunk_pages`, whatever the footer says): each
page starts with a Thrift PageHeader (compact protocol) whose field 2 is the page's
uncompressed size and field 3 its compressed size; the next header lies that many bytes
after the end of this one, up to the chunk's `total_compressed_size`. Only the header
bytes are read (a few dozen each, in windows of 8 KiB); a header's other fields
(statistics, encodings) are skipped by their lengths, never held. A header that does not
parse as Thrift (or claims over 16 MiB, or runs past the file's end) raises
`PageHeaderError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

_WINDOW = 8 << 10  # bytes read at a time for a header
_MAX_DEPTH = 32  # structs in structs: PageHeader needs 3 (header, statistics), damage more
# A header holds a few numbers and perhaps statistics (a column's min and max: writers cut
# them to a few KiB); one claiming more is damage, and the walk over it is bounded by this.
_MAX_HEADER_BYTES = 16 << 20
# Thrift compact types (https://github.com/apache/thrift/blob/master/doc/specs/
# thrift-compact-protocol.md): the fixed-size ones and their sizes.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE = 1, 2, 3, 4, 5, 6, 7
_BINARY, _LIST, _SET, _MAP, _STRUCT, _UUID = 8, 9, 10, 11, 12, 13
_VARINTS = (_I16, _I32, _I64)
_WIDTHS = {_TRUE: 1, _FALSE: 1, _BYTE: 1, _DOUBLE: 8, _UUID: 16}  # bytes, in a list too
_PAGE_KINDS = {0: "data page", 1: "index page", 2: "dictionary page", 3: "data page (v2)"}


class PageHeaderError(ValueError):
    """A page header that does not parse: damage."""


@dataclass(frozen=True)
class Page:
    """A page whose header was read: where it lies and what it claims."""

    offset: int  # the file byte where its header starts
    kind: str  # "data page", "dictionary page", …
    uncompressed: int  # bytes once decompressed: what pyarrow allocates to read it
    data_offset: int  # the file byte where its (compressed) data starts, after the header
    compressed: int  # bytes of data stored


class _Window:
    """The file's bytes from a position on, read a window at a time, so that skipping a
    field never reads it and a header costs one small read."""

    def __init__(self, handle: BinaryIO, position: int) -> None:
        self._handle = handle
        self.position = position  # the next byte to read
        self.header_start = position
        self._start = 0
        self._data = b""

    def byte(self) -> int:
        at = self.position - self._start
        if not 0 <= at < len(self._data):
            self._fill()
            at = 0
        self.position += 1
        return self._data[at]

    def skip(self, count: int) -> None:
        if count < 0:
            raise PageHeaderError(f"a negative length ({count})")
        self.position += count
        self._bounded()

    def _bounded(self) -> None:
        if self.position - self.header_start > _MAX_HEADER_BYTES:
            raise PageHeaderError(f"a page header over {_MAX_HEADER_BYTES:,} bytes")

    def _fill(self) -> None:
        self._bounded()
        self._handle.seek(self.position)
        self._data = self._handle.read(_WINDOW)
        self._start = self.position
        if not self._data:
            raise PageHeaderError("the file ends inside a page header")

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise PageHeaderError("a number over 10 bytes long")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)


def _skip(window: _Window, kind: int, depth: int) -> None:
    """Skip one value of compact type `kind` (its bytes are never held)."""
    if depth > _MAX_DEPTH:
        raise PageHeaderError(f"values nested over {_MAX_DEPTH} deep")
    if kind in _WIDTHS:  # a boolean field's value is in its type: _fields never skips it
        window.skip(_WIDTHS[kind])
    elif kind in _VARINTS:
        window.varint()
    elif kind == _BINARY:
        window.skip(window.varint())
    elif kind in (_LIST, _SET):
        header = window.byte()
        size, element = header >> 4, header & 0x0F
        if size == 15:
            size = window.varint()
        if element in _WIDTHS:
            window.skip(size * _WIDTHS[element])
            return
        for _ in range(size):
            _skip(window, element, depth + 1)
    elif kind == _MAP:
        size = window.varint()
        if size:
            types = window.byte()
            for _ in range(size):
                _skip(window, types >> 4, depth + 1)
                _skip(window, types & 0x0F, depth + 1)
    elif kind == _STRUCT:
        for _ in _fields(window, depth + 1):
            pass
    else:
        raise PageHeaderError(f"no Thrift type {kind}")


def _fields(window: _Window, depth: int):
    """(field id, type) of each field of a struct, the value skipped unless the caller
    reads it first (an i32 field: the caller calls `window.zigzag()` before asking on)."""
    if depth > _MAX_DEPTH:
        raise PageHeaderError(f"structs nested over {_MAX_DEPTH} deep")
    field = 0
    while True:
        header = window.byte()
        if header == 0:  # STOP
            return
        delta, kind = header >> 4, header & 0x0F
        field = field + delta if delta else window.zigzag()
        before = window.position
        yield field, kind
        if window.position == before and kind not in (_TRUE, _FALSE):
            _skip(window, kind, depth)


def _page(window: _Window) -> Page:
    """The page whose header starts at the window's position."""
    offset = window.header_start = window.position
    found: dict[int, int] = {}
    for field, kind in _fields(window, 0):
        if field in (1, 2, 3) and kind == _I32:
            found[field] = window.zigzag()
    if 2 not in found or 3 not in found:
        raise PageHeaderError("a page header without its sizes")
    uncompressed, compressed = found[2], found[3]
    if uncompressed < 0 or compressed < 0:
        raise PageHeaderError(f"a negative page size ({uncompressed}, {compressed})")
    kind = _PAGE_KINDS.get(found.get(1, -1), "page")
    return Page(offset, kind, uncompressed, window.position, compressed)


def chunk_pages(handle: BinaryIO, start: int, size: int) -> Iterator[Page]:
    """The pages of the column chunk at file bytes [start, start + size), in order;
    PageHeaderError where a header is damaged. Every page that starts inside the chunk is
    read (a header or a page may end past it: some writers leave a header out of the
    chunk's size, and pyarrow reads on)."""
    window = _Window(handle, start)
    while window.position < start + size:
        page = _page(window)
        yield page
        window.position = page.data_offset + page.compressed


def large_page(handle: BinaryIO, start: int, size: int, limit: int) -> Page | None:
    """The first page of the column chunk whose uncompressed size is over `limit`, or None;
    PageHeaderError where a header is damaged."""
    return next((p for p in chunk_pages(handle, start, size) if p.uncompressed > limit), None)
