"""What a JSON lines file's first bytes say, before any line of it is read (Beam-free).

JSON lines are UTF-8. A file that starts with UTF-16's byte order mark (FF FE, FE FF) is
read as UTF-16, converted to UTF-8 as it streams, as `bertkit books` and `bertkit
wikipedia` read one. A file that is UTF-32 (its mark), or UTF-16 without a mark (the NULs
its first ASCII characters hold: 7B 00 22 00), or one JSON array (its first byte other than
whitespace is "[") holds no JSON lines the stage reads: `checked_start` raises WideEncoding
or JsonArray before the first record, so the file fails once (unsupported_encoding,
json_array), saying how to convert it, rather than once a line. So does a file whose bytes
are gzip, bzip2 or zstd data (1F 8B, "BZh1"-"BZh9", 28 B5 2F FD) where text should be: a
compressed file named as plain, or one compressed twice (CompressedData); every line of it
would be an invalid_utf8 reject.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.io.compressed import compression_of
from pipelines.io.utf16 import head_of, utf16_as_utf8, utf16_mark


class JsonArray(Exception):
    """The file is one JSON array, not JSON lines."""


class CompressedData(Exception):
    """The (decompressed) bytes are gzip, bzip2 or zstd data: (format, suffix, first bytes)."""


class WideEncoding(Exception):
    """The file is UTF-16 or UTF-32, not UTF-8: (encoding, what shows it, iconv's name)."""


def checked_start(chunks: Iterator[bytes], path: str) -> Iterator[bytes]:
    """The file's chunks as UTF-8 (UTF-16 converted); WideEncoding, CompressedData or
    JsonArray before the first record; where UTF-16 is damaged or cut short, the text
    before the damage, then InputReadError (pipelines/io/utf16.py `DamagedUtf16`)."""
    return _refuse_json_array(_as_utf8(chunks, path))


_BYTE_ORDER_MARK = b"\xef\xbb\xbf"
# UTF-32's before UTF-16's: FF FE 00 00 starts both.
_UTF32_MARKS = ((b"\x00\x00\xfe\xff", "UTF-32BE"), (b"\xff\xfe\x00\x00", "UTF-32LE"))
# RFC 4627, section 3: JSON text starts with two ASCII characters, so the NULs among its
# first four bytes show the encoding (True: a NUL).
_WIDE_NULS = {
    (True, True, True, False): "UTF-32BE",
    (False, True, True, True): "UTF-32LE",
    (True, False, True, False): "UTF-16BE",
    (False, True, False, True): "UTF-16LE",
}


def _as_utf8(chunks: Iterator[bytes], path: str) -> Iterator[bytes]:
    """The chunks as they come, or converted from UTF-16 where its mark starts them (the
    mark dropped); WideEncoding, before the first record, for UTF-32 or UTF-16 without a
    mark (UTF-8 JSON has no NUL: a NUL is no JSON character)."""
    head, chunks = head_of(chunks, 4)  # its first four bytes, however the chunks come
    if (compression := compression_of(head)) is not None:
        raise CompressedData(*compression, head[:4])
    for mark, encoding in _UTF32_MARKS:
        if head.startswith(mark):
            shown = mark.hex(" ").upper()
            raise WideEncoding(encoding, f"it starts with the byte order mark {shown}", "UTF-32")
    nuls = tuple(byte == 0 for byte in head[:4])
    if len(nuls) == 4 and nuls in _WIDE_NULS:
        encoding = _WIDE_NULS[nuls]
        raise WideEncoding(encoding, f"its first bytes are {head[:4].hex(' ').upper()}", encoding)
    if (encoding := utf16_mark(head)) is not None:
        return _without_mark(utf16_as_utf8(chunks, encoding, path))
    return chunks


def _without_mark(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """UTF-16 converted, without its mark (U+FEFF, the first character it gives)."""
    for chunk in chunks:
        yield chunk.removeprefix(_BYTE_ORDER_MARK)
        break
    yield from chunks


def _refuse_json_array(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks as they come; JsonArray, before the first record, if the file's first
    byte other than whitespace (after a byte order mark) is "[": a JSON array, whether
    pretty-printed or on one line of any length (`json.dump(records, f)`), looked at in the
    chunks, never as a whole line. Whitespace before it passes on (blank lines)."""
    first = True
    for chunk in chunks:
        if first is not None:
            body = chunk.removeprefix(_BYTE_ORDER_MARK) if first else chunk
            first = False
            if stripped := body.lstrip():
                first = None  # looked: the rest passes unread
                if stripped.startswith(b"["):
                    raise JsonArray
        yield chunk
