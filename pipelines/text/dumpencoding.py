"""A dump's encoding, from its bytes: UTF-8, or UTF-16 by its byte-order mark, converted to
UTF-8 as it streams (pipelines/text/dumpxml.py parses the result and says what is refused).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator

from pipelines.io.compressed import InputReadError, decompressed_chunks
from pipelines.io.storage import Reader
from pipelines.io.utf16 import UTF16_MARKS, UTF32_MARKS, DamagedUtf16, head_of, utf16_mark
from pipelines.io.utf16 import utf16_as_utf8 as _utf16_as_utf8

__all__ = [
    "UTF8",
    "UTF16_MARKS",
    "UTF32_MARKS",
    "as_utf8",
    "canonical_encoding",
    "dump_encoding",
    "encoding_of",
    "sniff_encoding",
]

UTF8 = "utf-8"


def canonical_encoding(name: str) -> str:
    """Python's name for an encoding ("UTF16" → "utf-16"), or the name itself if unknown."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name


def encoding_of(head: bytes) -> str:
    """utf-16-le or utf-16-be for a file whose first bytes (4 or all) are that byte-order
    mark, else utf-8 (what is not UTF-8 then fails the declaration check or the parse; XML
    never holds U+0000, so FF FE 00 00 is UTF-32, which is not read)."""
    return utf16_mark(head) or UTF8


def dump_encoding(path: str, reader: Reader) -> str:
    """The encoding of a dump file, from its first decompressed bytes (`encoding_of`)."""
    chunks = decompressed_chunks(reader, path)
    try:
        encoding, _ = sniff_encoding(chunks)
    finally:
        chunks.close()
    return encoding


def sniff_encoding(chunks: Iterator[bytes]) -> tuple[str, Iterator[bytes]]:
    """The encoding the first bytes of `chunks` show, and every chunk, those included."""
    head, chunks = head_of(chunks, 4)
    return encoding_of(head), chunks


def as_utf8(chunks: Iterable[bytes], encoding: str, path: str) -> Iterator[bytes]:
    """UTF-16 chunks as UTF-8 chunks, one for one (at most 1.5 times as long), through the
    decoder every stage shares (pipelines/io/utf16.py): the text before damaged UTF-16 is
    given on (its pages parsed), then InputReadError (``malformed_xml``) names the byte."""
    try:
        yield from _utf16_as_utf8(chunks, encoding, path)
    except DamagedUtf16 as err:
        raise InputReadError(
            path,
            f"decompressed byte {err.at} of its {encoding.upper()}",
            f"not {encoding.upper()} as its byte-order mark says ({err.codec_reason})",
            "malformed_xml",
        ) from err
