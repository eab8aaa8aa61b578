"""`bertkit corpus`' one config: every flag, its type, default and help, written once.

`pipelines.command.flags` makes the command line from this dataclass (the flags every
documents stage shares come from `DocumentStageFlags`); the documents manifest records what
shapes the output (`recorded`), and the corpus' `license` and `language` for a dataset card.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from pipelines.beam.documents import DocumentStageFlags, FileUnitSizes
from pipelines.command.flags import AT_LEAST_1, ZERO_OR_MORE, option

# A record's line (JSON lines) or text value (Parquet) over this is refused: a document of
# 16 MiB is a whole book; reading, parsing and splitting one holds a few times that.
DEFAULT_MAX_LINE_KB = 16 << 10
DEFAULT_SOURCE = "corpus"

_SOURCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FIELD = re.compile(r"[^.\s]+(\.[^.\s]+)*")
# An SPDX license expression: ids (MIT, Apache-2.0, CC-BY-4.0, LicenseRef-x) joined by AND,
# OR, WITH, in brackets or not. Its syntax is checked, not the SPDX list (not shipped here).
_SPDX_TOKEN = re.compile(r"\(|\)|[A-Za-z0-9][A-Za-z0-9.+-]*")
_SPDX_OPERATORS = ("AND", "OR", "WITH")
# A BCP-47 tag's shape: a 2-3 letter language, then subtags (en, en-US, zh-Hant-TW, sr-Latn,
# de-CH-1996), so that "English" or "en_US" is refused.
_BCP47 = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*")


def source_name(text: str) -> str:
    """--source: the first part of every id (`<source>/<id>`), so no slash in it."""
    if not _SOURCE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a source is letters, digits, '.', '_' and '-' (no '/': it is the "
            "first part of every id, <source>/<id>), e.g. fineweb-edu"
        )
    return text


def field_path(text: str) -> str:
    """--text-field and the others: a key, or a dotted path into nested objects."""
    if not _FIELD.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a field is a key, or keys joined by '.' for nested ones (meta.title)"
        )
    return text


def spdx_expression(text: str) -> str:
    """--license: an SPDX license id or expression, checked for its syntax (ids joined by
    operators, brackets balanced)."""
    tokens = _SPDX_TOKEN.findall(text)
    words = [t for t in tokens if t not in ("(", ")")]
    alternating = all((t in _SPDX_OPERATORS) == (i % 2 == 1) for i, t in enumerate(words))
    depth, balanced = 0, True
    for token in tokens:
        depth += {"(": 1, ")": -1}.get(token, 0)
        balanced = balanced and depth >= 0
    if (
        # Spaces only between tokens: `str.split()` would also take \x1c-\x1f, \x85 and
        # \u2028 for whitespace, which the dataset card's YAML header cannot carry as such.
        "".join(tokens) != text.replace(" ", "")
        or not words
        or len(words) % 2 == 0
        or not alternating
        or not balanced
        or depth
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an SPDX license id or expression, e.g. CC-BY-4.0, "
            "ODC-By-1.0, 'MIT OR Apache-2.0' (https://spdx.org/licenses/), or "
            "LicenseRef-<name> for terms of your own (LicenseRef-Acme-Research-Terms)"
        )
    return text


def bcp47_tag(text: str) -> str:
    """--language: a BCP-47 language tag, checked for its shape."""
    if not _BCP47.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a BCP-47 language tag, e.g. en, de, pt-BR, zh-Hant (not a "
            "language's name, nor en_US)"
        )
    return text


@dataclass(frozen=True)
class CorpusConfig(DocumentStageFlags, FileUnitSizes):
    """Every flag of `bertkit corpus`; the manifest records `recorded()`."""

    text_field: str = option("text", help="the field holding the text", parse=field_path)
    id_field: str = option(
        "id",
        help="the field holding a record's id (string or integer); a record without one is "
        "<file>:<line> (JSON lines) or <file>:<row> (Parquet)",
        parse=field_path,
    )
    title_field: str | None = option(
        None, help="the field holding a title (default: the record's id)", parse=field_path
    )
    source: str = option(
        DEFAULT_SOURCE,
        help="the documents' source, and the first part of their ids: <source>/<id>",
        parse=source_name,
    )
    license: str | None = option(
        None, help="the corpus' SPDX license id, recorded in the manifest", parse=spdx_expression
    )
    language: str | None = option(
        None, help="the corpus' BCP-47 language tag, recorded in the manifest", parse=bcp47_tag
    )
    min_paragraph_words: int = option(
        3,
        help="drop paragraphs with fewer words (0 for text written without spaces)",
        bounds=ZERO_OR_MORE,
    )
    unit_mb: int = option(
        64,
        help="group input files into units of work of about this many MB (0: one file each)",
        bounds=ZERO_OR_MORE,
    )
    max_line_kb: int = option(
        DEFAULT_MAX_LINE_KB,
        help="reject a JSON line (or a Parquet text value) over this many KiB, and a Parquet "
        "row group holding a page over 8 times this (at least 64 MiB)",
        bounds=AT_LEAST_1,
    )

    def recorded(self) -> dict[str, Any]:
        """What shapes the output, as the documents manifest records it; license and
        language always (null when not given), for the dataset card that reads them."""
        return {
            "text_field": self.text_field,
            "id_field": self.id_field,
            "title_field": self.title_field,
            "source": self.source,
            "license": self.license,
            "language": self.language,
            "min_paragraph_words": self.min_paragraph_words,
            "unit_bytes": self.unit_bytes,
            "max_file_text_bytes": self.max_file_text_bytes,
            "max_line_bytes": self.max_line_bytes,
        }
