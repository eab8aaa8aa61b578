"""What a JSON lines file's first bytes say, before any line of it is read (Beam-free).

JSON lines are UTF-8. A file that starts with UTF-16's byte order mark (FF FE, FE FF) is
read as UTF-16, converted to UTF-8 as it streams, as `bertkit books` and `bertkit
wikipedia` read one. A file that is UTF-32 (its mark), or UTF-16 without a mark (the NULs
its first ASCII characters hold: 7B 00 22 00), or one JSON array (its first byte other than
whitespace is "[") holds no JSON lines the stage reads: `checked_start` raises WideEncoding
or JsonArray before the first record, so the file fails once (unsupported_encoding,
json_array), saying how to convert it, rather than once a line.
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterator

from pipelines.io.compressed import InputReadError


class JsonArray(Exception):
    """The file is one JSON array, not JSON lines."""


class WideEncoding(Exception):
    """The file is UTF-16 or UTF-32, not UTF-8: (encoding, what shows it, iconv's name)."""


def checked_start(chunks: Iterator[bytes], path: str) -> Iterator[bytes]:
    """The file's chunks as UTF-8 (UTF-16 converted); WideEncoding or JsonArray before the
    first record, InputReadError where UTF-16 is damaged or cut short."""
    return _refuse_json_array(_as_utf8(chunks, path))


_BYTE_ORDER_MARK = b"\xef\xbb\xbf"
# UTF-32's before UTF-16's: FF FE 00 00 starts both.
_UTF32_MARKS = ((b"\x00\x00\xfe\xff", "UTF-32BE"), (b"\xff\xfe\x00\x00", "UTF-32LE"))
_UTF16_MARKS = ((b"\xfe\xff", "UTF-16BE"), (b"\xff\xfe", "UTF-16LE"))
_MARKS = {encoding: mark for mark, encoding in _UTF16_MARKS}
_CODECS = {"UTF-16BE": "utf-16-be", "UTF-16LE": "utf-16-le"}
# RFC 4627, section 3: JSON text starts with two ASCII characters, so the NULs among its
# first four bytes show the encoding (True: a NUL).
_WIDE_NULS = {
    (True, True, True, False): "UTF-32BE",
    (False, True, True, True): "UTF-32LE",
    (True, False, True, False): "UTF-16BE",
    (False, True, False, True): "UTF-16LE",
}


def _as_utf8(chunks: Iterator[bytes], path: str) -> Iterator[bytes]:
    """The chunks as they come, or converted from UTF-16 where its mark starts them;
    WideEncoding, before the first record, for UTF-32 or UTF-16 without a mark (UTF-8 JSON
    has no NUL: a NUL is no JSON character)."""
    chunks = iter(chunks)
    head = b""
    for chunk in chunks:  # its first four bytes, however the chunks come
        head += chunk
        if len(head) >= 4:
            break
    for mark, encoding in _UTF32_MARKS:
        if head.startswith(mark):
            shown = mark.hex(" ").upper()
            raise WideEncoding(encoding, f"it starts with the byte order mark {shown}", "UTF-32")
    nuls = tuple(byte == 0 for byte in head[:4])
    if len(nuls) == 4 and nuls in _WIDE_NULS:
        encoding = _WIDE_NULS[nuls]
        raise WideEncoding(encoding, f"its first bytes are {head[:4].hex(' ').upper()}", encoding)
    chunks = itertools.chain([head] if head else [], chunks)
    for mark, encoding in _UTF16_MARKS:
        if head.startswith(mark):
            return _utf16_as_utf8(chunks, encoding, path)
    return chunks


def _utf16_as_utf8(chunks: Iterator[bytes], encoding: str, path: str) -> Iterator[bytes]:
    """UTF-16 chunks (the mark first) as UTF-8, one for one (at most 1.5 times as long);
    InputReadError where the bytes are not UTF-16 (a lone surrogate, an odd last byte),
    after the text before that byte."""
    decoder = codecs.getincrementaldecoder("utf-16")()  # reads the mark, drops it
    read = 0  # bytes decoded so far
    for chunk in itertools.chain(chunks, [None]):
        held = decoder.getstate()[0]  # the bytes of a character the last chunk cut
        try:
            text = decoder.decode(chunk or b"", final=chunk is None)
        except UnicodeDecodeError as err:
            good = (held + (chunk or b""))[: err.start]
            if not read:  # the first chunk: the mark leads it
                good = good[len(_MARKS[encoding]) :]
            yield good.decode(_CODECS[encoding]).encode("utf-8")
            cut = chunk is None
            raise InputReadError(
                path,
                f"decompressed byte {read - len(held) + err.start}",
                f"not {encoding} as its byte order mark says ({err.reason}): the file is "
                f"{'cut short' if cut else 'damaged'}",
                "truncated_input" if cut else "corrupt_input",
            ) from None
        read += len(chunk or b"")
        if text:
            yield text.encode("utf-8")


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
