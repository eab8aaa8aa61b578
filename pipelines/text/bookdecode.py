"""A book file's bytes → its lines of text: one reading for both formats of `bertkit books`.

`--format files` decodes a whole book (`decode_book`), `--format lines` streams a corpus file
line by line (`book_lines`); both go through `book_lines`, so line ends, byte-order marks,
encodings, control characters and NUL bytes are read alike. Beam-free and pure (the bytes
come in as chunks), tested on literal bytes. Rules, in order, and why:

1. Sniffing, on the first 8 KiB (decompressed). An empty file is no book (``file is
   empty``). A UTF-16 byte-order mark (``FF FE``, ``FE FF``): the file is read as UTF-16,
   converted to UTF-8 as it streams (pipelines/io/utf16.py, the decoder every stage
   shares). UTF-16 that is not (a lone surrogate, a file cut inside a character) is a file
   that cannot be read to its end: every whole line before the damage is given, then
   `DamagedUtf16` (an InputReadError: ``corrupt_input``, ``truncated_input``) names the
   byte, and the stage fails the input. A UTF-32 mark is refused, and so is UTF-16 without
   a mark (a NUL at nearly every other byte), each saying how to convert it (iconv). Then
   the binary test: more than 5 % of the bytes are control bytes that text never holds
   (NUL and the other C0 bytes but TAB, LF, CR, FF and the DOS end-of-file SUB; DEL):
   images, archives, executables are full of them. One rule for NUL bytes: many of them
   in the head make the file binary; a few anywhere (a stray NUL, a damaged sector) are
   removed and counted as every other control character is (rule 5).
2. Line ends: CRLF and a lone CR (old Mac files) end a line as LF does. VT and FF (page
   breaks, which fall inside paragraphs and even sentences) are spaces. A UTF-8 byte-order
   mark at the start is no text and is removed.
3. A line over ``max_bytes`` (as stored; UTF-16 counted as its UTF-8) is no text: it comes out
   as a `LongTextLine`, never held whole (pipelines/io/compressed.py `lines`).
4. Each line is decoded on its own: as UTF-8 where it is UTF-8, else as cp1252 (Windows-1252,
   the de-facto encoding of "latin-1" files: 0x93/0x94 are its curly quotes), without
   cp1252's five undefined bytes (0x81 0x8D 0x8F 0x90 0x9D: Latin-1 would make them C1
   control characters). So one stray byte costs its line the UTF-8 reading, never the book.
   Such lines are counted (`DecodeStats.fallback_lines`).
5. Control characters are removed from every line and counted: C0 but TAB (NUL, ESC, SUB, …),
   DEL, C1 (U+0080-U+009F, UTF-8 can spell them too), and U+FEFF (a byte-order mark inside
   the text, where two files were joined). No line given out holds one.
6. A file left with nothing but whitespace is no book (``file has no text``).

A file that cannot be read this way raises `BookTextError`, whose message is the reject's
(damaged UTF-16: `DamagedUtf16`, above).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pipelines.io.compressed import LongLine, lines
from pipelines.io.utf16 import UTF32_MARKS, head_of, utf16_as_utf8, utf16_mark

__all__ = [
    "MAX_LINE_BYTES",
    "BookTextError",
    "DecodeStats",
    "DecodedBook",
    "LongTextLine",
    "book_lines",
    "decode_book",
    "decode_line",
]

# No sentence, and no paragraph of a real book, is anywhere near this long (the longest
# lines of the sample books are a few hundred bytes; a book with unwrapped paragraphs has
# lines of a few kB). A longer line is a blob, or a file without newlines: one 256 MiB line
# once took 2.8 GB and came out as a single 268 MB "sentence".
MAX_LINE_BYTES = 1 << 20

_SNIFF_BYTES = 8192
# A real text may hold a stray control character or two; binary formats are full of them.
_MAX_CONTROL_SHARE = 0.05
_BINARY_CONTROL_BYTES = bytes(b for b in range(0x20) if b not in b"\t\n\x0c\r\x1a") + b"\x7f"
# UTF-16 without a mark: a NUL at least at this share of the positions of one parity (ASCII
# text in UTF-16), and at most 1/20 as many at the other.
_UTF16_NUL_SHARE = 0.3
_CONVERT = "convert it to UTF-8 first, e.g. iconv -f {} -t UTF-8 FILE > FILE.utf8.txt"
_PAGE_BREAKS = bytes.maketrans(b"\x0b\x0c", b"  ")
_CP1252_UNDEFINED = b"\x81\x8d\x8f\x90\x9d"
_CONTROL_RE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ufeff]")
_CHUNK_BYTES = 1 << 20  # decode_book hands book_lines its bytes in pieces of this size


class BookTextError(ValueError):
    """A file that cannot be used as book text; ``str(error)`` is the reject's message and
    ``position`` where it lies ("file", or "byte N" of the decompressed bytes)."""

    def __init__(self, message: str, position: str = "file") -> None:
        super().__init__(message)
        self.position = position


@dataclass(frozen=True)
class LongTextLine:
    """A line over the length limit, which `book_lines` left out."""

    number: int  # 1-based, in the file it came from
    length: int  # bytes as stored (UTF-16: of its UTF-8), without the line end

    def error(self, max_bytes: int) -> str:
        """The reject's message."""
        return (
            f"line {self.number} is {self.length} bytes, over the {max_bytes}-byte line limit "
            "(--max_line_kb): no sentence is that long; the line is skipped, the rest kept"
        )


@dataclass
class DecodeStats:
    """What `book_lines` met in one file, for the stage's counts."""

    encoding: str = "utf-8"  # or "utf-16-le", "utf-16-be" (by the byte-order mark)
    fallback_lines: int = 0  # lines that were not UTF-8, decoded as cp1252 (rule 4)
    controls_removed: int = 0  # control characters and undefined cp1252 bytes (rules 4-5)


@dataclass(frozen=True)
class DecodedBook:
    """Result of `decode_book`."""

    text: str  # the lines joined by "\n"; a long line is an empty one
    long_lines: tuple[LongTextLine, ...] = ()
    stats: DecodeStats = field(default_factory=DecodeStats)


def decode_book(
    data: bytes, max_line_bytes: int = MAX_LINE_BYTES, path: str = "book"
) -> DecodedBook:
    """A whole book file's bytes, read by `book_lines`: its lines joined by "\\n" (a line
    over ``max_line_bytes`` left empty, so it ends its paragraph: the text either side of it
    was never adjacent), the long lines, and the counts. BookTextError if it is no text,
    DamagedUtf16 (naming ``path``) if its UTF-16 is damaged."""
    stats = DecodeStats()
    pieces = (data[at : at + _CHUNK_BYTES] for at in range(0, len(data), _CHUNK_BYTES))
    text_lines: list[str] = []
    long_lines: list[LongTextLine] = []
    for line in book_lines(pieces, max_line_bytes, stats, path):
        if isinstance(line, LongTextLine):
            long_lines.append(line)
            line = ""
        text_lines.append(line)
    return DecodedBook("\n".join(text_lines), tuple(long_lines), stats)


def book_lines(
    chunks: Iterable[bytes],
    max_bytes: int = MAX_LINE_BYTES,
    stats: DecodeStats | None = None,
    path: str = "book",
) -> Iterator[str | LongTextLine]:
    """The lines of a file given as byte chunks (rules 1-6 of the module), without their line
    ends; a line over ``max_bytes`` is a LongTextLine. Lazy: memory is bounded by the line
    limit and a chunk. Raises BookTextError (rule 1 before the first line; rule 6 after the
    last), DamagedUtf16 (naming ``path``) after the last whole line before damaged UTF-16,
    and updates ``stats``."""
    stats = stats if stats is not None else DecodeStats()
    head, stream = head_of(chunks, _SNIFF_BYTES)
    stats.encoding = _sniff(head)
    if stats.encoding != "utf-8":
        stream = utf16_as_utf8(stream, stats.encoding, path)
    text_seen = False
    for number, raw in enumerate(lines(_line_breaks(_without_mark(stream)), max_bytes), 1):
        if isinstance(raw, LongLine):
            text_seen = True
            yield LongTextLine(number, raw.length)
            continue
        line = decode_line(raw, stats)
        text_seen = text_seen or bool(line.strip())
        yield line
    if not text_seen:
        raise BookTextError("file has no text: only whitespace and control characters")


def decode_line(raw: bytes, stats: DecodeStats) -> str:
    """One line's bytes as text: UTF-8, else cp1252 without its undefined bytes; control
    characters removed (rules 4-5); ``stats`` counts what was done."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        stats.fallback_lines += 1
        defined = raw.translate(None, _CP1252_UNDEFINED)
        stats.controls_removed += len(raw) - len(defined)
        line = defined.decode("cp1252")
    if _CONTROL_RE.search(line):
        line, removed = _CONTROL_RE.subn("", line)
        stats.controls_removed += removed
    return line


def _sniff(head: bytes) -> str:
    """The encoding of a file starting with ``head`` (rule 1), or BookTextError."""
    if not head:
        raise BookTextError("file is empty")
    if head.startswith(UTF32_MARKS):
        raise BookTextError(
            "looks like UTF-32 text (a UTF-32 byte-order mark): " + _CONVERT.format("UTF-32")
        )
    if (encoding := utf16_mark(head)) is not None:
        sample = head[2 : len(head) - len(head) % 2].decode(encoding, "replace")
        _check_not_binary(sample.encode("utf-8", "replace"))
        return encoding
    if (unmarked := _utf16_without_mark(head)) is not None:
        raise BookTextError(
            f"looks like {unmarked} text without a byte-order mark (a NUL at every other "
            f"byte), which cannot be told from binary data for sure: {_CONVERT.format(unmarked)}"
        )
    _check_not_binary(head)
    return "utf-8"


def _utf16_without_mark(head: bytes) -> str | None:
    """ "UTF-16LE" or "UTF-16BE" where NULs fill one parity of the bytes and not the other."""
    pairs = len(head) // 2
    even, odd = head[0 : 2 * pairs : 2].count(0), head[1 : 2 * pairs : 2].count(0)
    if pairs >= 2 and odd >= _UTF16_NUL_SHARE * pairs and even * 20 <= odd:
        return "UTF-16LE"
    if pairs >= 2 and even >= _UTF16_NUL_SHARE * pairs and odd * 20 <= even:
        return "UTF-16BE"
    return None


def _check_not_binary(head: bytes) -> None:
    controls = len(head) - len(head.translate(None, _BINARY_CONTROL_BYTES))
    if controls > _MAX_CONTROL_SHARE * len(head):
        raise BookTextError(
            f"looks binary: {controls:,} of its first {len(head):,} bytes are control "
            f"characters ({head.count(0):,} of them NUL), and text holds few or none"
        )


def _without_mark(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks without a UTF-8 byte-order mark at the start (rule 2)."""
    first = next(chunks, b"")
    yield first.removeprefix(codecs.BOM_UTF8)
    yield from chunks


def _line_breaks(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks with every line end (CRLF, CR) as LF and VT, FF as spaces (rule 2), a CRLF
    split between two chunks included."""
    held_cr = False  # the last chunk ended in CR: LF if the next one does not start with LF
    for chunk in chunks:
        if held_cr:
            chunk = chunk if chunk.startswith(b"\n") else b"\n" + chunk
        held_cr = chunk.endswith(b"\r")
        if held_cr:
            chunk = chunk[:-1]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        yield chunk.translate(_PAGE_BREAKS)
    if held_cr:
        yield b"\n"
