"""What a JSON lines file's first bytes and first line say, before its records are read
(Beam-free).

JSON lines are UTF-8. A file that starts with UTF-16's byte order mark (FF FE, FE FF) is
read as UTF-16, converted to UTF-8 as it streams, as `bertkit books` and `bertkit
wikipedia` read one. A file that is UTF-32 (its mark), or UTF-16 without a mark (the NULs
its first ASCII characters hold: 7B 00 22 00), holds no JSON lines the stage reads:
`checked_start` raises WideEncoding before the first record, so the file fails once
(unsupported_encoding), saying how to convert it, rather than once a line. So does a file
whose bytes are gzip, bzip2 or zstd data (1F 8B, "BZh1"-"BZh9", 28 B5 2F FD) where text
should be: a compressed file named as plain, or one compressed twice (CompressedData);
every line of it would be an invalid_utf8 reject. And a file that is one JSON array, told
by its first line (`json_lines_only` raises JsonArray: json_array), with the `jq` line that
converts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from pipelines.io.compressed import LongLine, compression_of
from pipelines.io.utf16 import head_of, utf16_as_utf8, utf16_mark


class JsonArray(Exception):
    """The file is one JSON array, not JSON lines."""


class CompressedData(Exception):
    """The (decompressed) bytes are gzip, bzip2 or zstd data: (format, suffix, first bytes)."""


class WideEncoding(Exception):
    """The file is UTF-16 or UTF-32, not UTF-8: (encoding, what shows it, iconv's name)."""


def checked_start(chunks: Iterator[bytes], path: str) -> Iterator[bytes]:
    """The file's chunks as UTF-8 (UTF-16 converted); WideEncoding or CompressedData before
    the first record; where UTF-16 is damaged or cut short, the text
    before the damage, then InputReadError (pipelines/io/utf16.py `DamagedUtf16`)."""
    return _as_utf8(chunks, path)


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


def json_lines_only(raw_lines: Iterator[bytes | LongLine]) -> Iterator[bytes | LongLine]:
    """The lines as they come (a blank line before the first record as an empty one);
    JsonArray, before the first record, if the file is one JSON array: its first line other
    than blank ones starts with "[" (after a byte order mark and spaces) and either is not a
    whole JSON value on its own (the array goes on over the lines after it, pretty-printed)
    or is followed by nothing but blank lines (the whole file is one array, as
    `json.dump(records, f)` writes it, on one line of any length). A whole array on the
    first line followed by records (a header row, `["id","text"]`) is JSON lines whose first
    record is bad: the caller rejects it (not_an_object) and reads on."""
    blank_before = 0
    for first in raw_lines:
        if not _blank(first):
            break
        blank_before += 1
    else:
        yield from [b""] * blank_before
        return
    head = first.head if isinstance(first, LongLine) else first
    if head.removeprefix(_BYTE_ORDER_MARK).lstrip().startswith(b"["):
        if not isinstance(first, LongLine) and not _whole_json(first):
            raise JsonArray  # its array goes on past its line
        blank_after = 0
        for line in raw_lines:
            if _blank(line):
                blank_after += 1
                continue
            yield from [b""] * blank_before
            yield first
            yield from [b""] * blank_after
            yield line
            break
        else:
            raise JsonArray  # nothing follows the array: it is the whole file
    else:
        yield from [b""] * blank_before
        yield first
    yield from raw_lines


def _blank(line: bytes | LongLine) -> bool:
    if isinstance(line, LongLine):
        return False
    line = line.removeprefix(_BYTE_ORDER_MARK)
    return not line or line.isspace()


def _whole_json(line: bytes) -> bool:
    """Whether the line is one whole JSON value (not the start of one that goes on)."""
    try:
        json.loads(line.removeprefix(_BYTE_ORDER_MARK))
    except (ValueError, RecursionError):
        return False
    return True
