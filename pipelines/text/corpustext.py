"""A corpus record's text → its paragraphs of running text, Beam-free (`bertkit corpus`).

Corpus records (a web page of FineWeb, a document of Dolma, a row of a database export)
arrive already cleaned: no hard wrapping, no boilerplate to strip, so none of booktext's
reflow and heading rules apply. What is left:

0. Control characters: the C0 and C1 controls that are not whitespace (NUL, BEL, ESC, DEL,
   U+0080-U+009F but NEL, …) are removed, as `bertkit books` removes them: they are no part
   of the words around them ("a\\x00b" → "ab"). Those that are whitespace to `str.split`
   (tab, LF, VT, FF, CR, the separators U+001C-U+001F, NEL U+0085) separate words, and
   rules 1-4 make them a newline or a space.
1. Line endings: "\\r\\n" and a lone "\\r" become "\\n".
2. Paragraphs: a blank line (one holding nothing but spaces) ends a paragraph; the single
   newlines inside one are spaces (a record that keeps a sentence per line is one paragraph,
   and the sentence splitter finds its sentences again).
3. Bounded length: a paragraph over ``max_chars`` characters (1 Mi, booktext's bound) is cut
   after the last space, tab or newline of each window (at the window's end if it has
   none: the cut pipelines/bert/sentence_cuts.py makes of a long sentence), so splitting
   one never holds more than that; counted as cut. Rule 5 judges the paragraph before the
   cut, and its pieces are kept or dropped together: the cut loses no word.
4. Whitespace: every run of whitespace (Unicode's: NBSP, tabs, the newlines of rule 2)
   becomes one space, and the ends are stripped.
5. Short paragraphs: one with fewer than ``min_words`` words (whitespace-separated tokens
   holding a letter or digit, as `bertkit books` counts them) is dropped and counted: a
   menu entry, a heading, a stray "Share". Text written without spaces between words
   (Chinese, Japanese, Thai) is one word a paragraph by this count: use ``min_words`` 0
   or 1 there.

The sentences of each paragraph are `pipelines.text.sentences`' (the caller splits them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pipelines.text.booktext import MAX_PARAGRAPH_CHARS

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")  # a line of nothing but (non-newline) spaces
_WORD_CHARACTER = re.compile(r"[^\W_]")  # a letter or digit, in any script
_TOKEN = re.compile(r"\S+")  # str.split()'s tokens, one at a time
_NON_SPACE = re.compile(r"\S")
# C0 and C1 controls but those str.split() takes for whitespace (\t \n \v \f \r, \x1c-\x1f,
# \x85): rule 0 removes them.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


# Those of them in ASCII, looked for in bytes: 3 times faster than the regex on ASCII text.
_ASCII_CONTROLS = bytes([*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F])
_LOOK_CHARS = 1 << 20  # ASCII text is looked at a MiB at a time (two copies of that held)


def without_controls(text: str) -> str:
    """`text` without the control characters that are not whitespace (rule 0)."""
    if text.isascii():
        for start in range(0, len(text), _LOOK_CHARS):
            part = text[start : start + _LOOK_CHARS].encode("ascii")
            if len(part.translate(None, _ASCII_CONTROLS)) != len(part):
                return _CONTROL.sub("", text)
        return text
    return _CONTROL.sub("", text) if _CONTROL.search(text) else text


@dataclass
class ParagraphCounts:
    """What `record_paragraphs` left out or cut, for the stage's counts."""

    short: int = 0  # paragraphs under min_words words, dropped
    cut: int = 0  # paragraphs over max_chars characters, cut into pieces


def record_paragraphs(
    text: str,
    min_words: int = 3,
    counts: ParagraphCounts | None = None,
    max_chars: int = MAX_PARAGRAPH_CHARS,
) -> Iterator[str]:
    """The paragraphs of one record's text, by the module's rules, one at a time."""
    counts = counts if counts is not None else ParagraphCounts()
    text = without_controls(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    for block in _BLANK_LINE.split(text):
        whole = len(block) > max_chars  # cut (rule 3), but judged as one paragraph (rule 5)
        if whole:
            if min_words and _NON_SPACE.search(block) and not _has_words(_tokens(block), min_words):
                counts.short += 1
                continue
            counts.cut += 1
        for piece in _pieces(block, max_chars):
            words = piece.split()
            if not words:
                continue
            if min_words and not whole and not _has_words(words, min_words):
                counts.short += 1
                continue
            yield " ".join(words)


def _tokens(block: str) -> Iterator[str]:
    """`block.split()`, one token at a time (a long block's tokens are never all held)."""
    return (match[0] for match in _TOKEN.finditer(block))


def _pieces(block: str, max_chars: int) -> Iterator[str]:
    """`block` in pieces of at most `max_chars` characters, each ending after the last space,
    tab or newline of its window (or at the window's end when it has none)."""
    start = 0
    while len(block) - start > max_chars:
        end = start + max_chars
        cut = max(block.rfind(space, start + 1, end) for space in " \t\n") + 1
        if cut <= start + 1:
            cut = end
        yield block[start:cut]
        start = cut
    yield block[start:]


def _has_words(tokens: Iterable[str], wanted: int) -> bool:
    """Whether at least `wanted` of the tokens hold a letter or digit (looks no further)."""
    if isinstance(tokens, list) and len(tokens) < wanted:
        return False
    found = 0
    for token in tokens:
        if token.isalnum() or _WORD_CHARACTER.search(token):
            found += 1
            if found >= wanted:
                return True
    return False
