"""UTF-16 inputs read as UTF-8: a file's first bytes, its byte-order mark, and the one
streaming decoder `bertkit wikipedia`, `books` and `corpus` read UTF-16 through (Beam-free).

What each stage refuses on top (UTF-32, UTF-16 without a mark, binary, a JSON array) and how
it names the damage is its own: pipelines/text/dumpencoding.py, bookdecode.py,
pipelines/corpus/filestart.py.
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterable, Iterator

from pipelines.io.compressed import InputReadError

__all__ = [
    "UTF16_MARKS",
    "UTF32_MARKS",
    "DamagedUtf16",
    "head_of",
    "utf16_as_utf8",
    "utf16_mark",
]

# UTF-32-LE's mark starts with UTF-16-LE's (FF FE 00 00): UTF-32's are looked for first.
UTF32_MARKS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF16 = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
UTF16_MARKS = tuple(mark for mark, _ in _UTF16)


def head_of(chunks: Iterable[bytes], size: int) -> tuple[bytes, Iterator[bytes]]:
    """The first ``size`` bytes at least (all of them in a shorter file), however the chunks
    come, and every chunk, those included (the head as one)."""
    chunks = iter(chunks)
    parts, held = [], 0
    for chunk in chunks:
        parts.append(chunk)
        held += len(chunk)
        if held >= size:
            break
    head = b"".join(parts)
    return head, itertools.chain([head] if head else [], chunks)


def utf16_mark(head: bytes) -> str | None:
    """ "utf-16-le" or "utf-16-be" for a file whose first bytes (4, or all) are that
    byte-order mark, else None (UTF-32's mark included)."""
    if head.startswith(UTF32_MARKS):
        return None
    return next((encoding for mark, encoding in _UTF16 if head.startswith(mark)), None)


class DamagedUtf16(InputReadError):
    """UTF-16 bytes that are not: a lone surrogate (``corrupt_input``), or a file that ends
    inside a character (``truncated_input``). Every character before ``at`` was given on."""

    def __init__(self, path: str, encoding: str, at: int, codec_reason: str, cut: bool) -> None:
        self.name = _iconv_name(encoding)  # UTF-16LE, as iconv -f takes it
        self.at = at  # the decompressed byte of the file where the damage starts
        self.codec_reason = codec_reason  # Python's words: "illegal UTF-16 surrogate", …
        self.cut = cut
        super().__init__(
            path,
            f"decompressed byte {at}",
            f"not {self.name} as its byte order mark says ({codec_reason}): the file is "
            f"{'cut short' if cut else 'damaged'}",
            "truncated_input" if cut else "corrupt_input",
        )


def _iconv_name(encoding: str) -> str:
    """ "utf-16-le" → "UTF-16LE"."""
    return encoding.upper().replace("UTF-16-", "UTF-16")


def utf16_as_utf8(chunks: Iterable[bytes], encoding: str, path: str) -> Iterator[bytes]:
    """UTF-16 chunks (``encoding``: utf-16-le or utf-16-be; a leading mark is the character
    U+FEFF, which the caller drops) as UTF-8 chunks, one for one (at most 1.5 times as long),
    in bounded memory. Where the bytes are not UTF-16, every character before the damage is
    given on first, then DamagedUtf16 names the byte."""
    decoder = codecs.getincrementaldecoder(encoding)()
    read = 0  # bytes decoded so far
    for chunk in itertools.chain(chunks, [None]):
        held = decoder.getstate()[0]  # the bytes of a character the last chunk cut
        data = chunk if chunk is not None else b""
        try:
            text = decoder.decode(data, final=chunk is None)
        except UnicodeDecodeError as err:
            # The bytes before err.start are whole characters of this call: decode them alone.
            if good := (held + data)[: err.start].decode(encoding):
                yield good.encode("utf-8")
            at = read - len(held) + err.start
            raise DamagedUtf16(path, encoding, at, err.reason, cut=chunk is None) from None
        read += len(data)
        if text:
            yield text.encode("utf-8")
