"""A dump's encoding, from its bytes: UTF-8, or UTF-16 by its byte-order mark, converted to
UTF-8 as it streams (pipelines/text/dumpxml.py parses the result and says what is refused).
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterable, Iterator

from pipelines.io.compressed import InputReadError, decompressed_chunks
from pipelines.io.storage import Reader

UTF8 = "utf-8"
# A file starting with one of these is UTF-16; UTF-32-LE's mark starts with UTF-16-LE's, and
# XML never holds U+0000, so FF FE 00 00 is UTF-32, which is not read.
_UTF16_MARKS = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
UTF32_MARKS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
UTF16_MARKS = tuple(mark for mark, _ in _UTF16_MARKS)


def canonical_encoding(name: str) -> str:
    """Python's name for an encoding ("UTF16" → "utf-16"), or the name itself if unknown."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name


def encoding_of(head: bytes) -> str:
    """utf-16-le or utf-16-be for a file whose first bytes (4 or all) are that byte-order
    mark, else utf-8 (what is not UTF-8 then fails the declaration check or the parse)."""
    if head.startswith(UTF32_MARKS):
        return UTF8
    return next((name for mark, name in _UTF16_MARKS if head.startswith(mark)), UTF8)


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
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= 4:
            break
    return encoding_of(head), itertools.chain([head] if head else [], chunks)


def as_utf8(chunks: Iterable[bytes], encoding: str, path: str) -> Iterator[bytes]:
    """UTF-16 chunks as UTF-8 chunks, one for one (at most 1.5 times as long)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    read = 0  # source bytes decoded so far
    for chunk in itertools.chain(chunks, [None]):
        pending = len(decoder.getstate()[0])
        try:
            text = decoder.decode(chunk or b"", final=chunk is None)
        except UnicodeDecodeError as err:
            raise InputReadError(
                path,
                f"decompressed byte {read - pending + err.start} of its {encoding.upper()}",
                f"not {encoding.upper()} as its byte-order mark says ({err.reason})",
                "malformed_xml",
            ) from err
        read += len(chunk or b"")
        if text:
            yield text.encode(UTF8)
