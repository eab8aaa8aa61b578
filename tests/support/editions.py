"""Another edition of a Project Gutenberg book, as a second source of the same text has it:
re-wrapped at another width, typographic quotes and dashes, CRLF line ends, cp1252 bytes.

Shared by tests/test_dedup.py and bench/dedup.py: `bertkit books` reads such an edition to
(nearly) the same words as the original, so `bertkit dedup` must keep one of the two.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SPEAKER = re.compile(r"((?:[^\t\n]*\t)*)(.*)")  # a play's "NAME\t" (up to the last tab)


def _rewrap(paragraph: str, width: int) -> str:
    """The paragraph's words in lines of at most `width` characters, its first line's
    prefix up to a tab (a speaker's name) and its continuation lines' indent kept."""
    lines = paragraph.split("\n")
    if len(lines) < 2:
        return paragraph
    head, first = _SPEAKER.fullmatch(lines[0]).groups()  # type: ignore[union-attr]
    indent = re.match(r"[ \t]*", lines[1]).group()  # type: ignore[union-attr]
    words = " ".join([first, *(line.strip() for line in lines[1:])]).split()
    return textwrap.fill(
        " ".join(words), width, initial_indent=head, subsequent_indent=indent, expand_tabs=False
    )


def edition_text(original: str, width: int = 55) -> str:
    """`original` (a Gutenberg text) as another edition prints it (module docstring)."""
    paragraphs = _PARAGRAPH_BREAK.split(original.replace("\r\n", "\n"))
    text = "\n\n".join(_rewrap(paragraph, width) for paragraph in paragraphs)
    text = text.replace("--", "\u2014")
    text = re.sub(r'"(\w)', "\u201c\\1", text).replace('"', "\u201d")
    return text.replace("\n", "\r\n")


def write_edition(original: Path, target: Path, width: int = 55) -> None:
    """Write the edition of the UTF-8 (ASCII) book `original` to `target`, in cp1252."""
    target.write_bytes(edition_text(original.read_text("utf-8"), width).encode("cp1252"))
