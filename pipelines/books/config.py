"""`bertkit books`' one config: every flag, its type, default and help, written once.

`pipelines.command.flags` makes the command line from this dataclass (the flags every
documents stage shares come from `DocumentStageFlags`); the documents manifest records what
shapes the output (`recorded`), in bytes, as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.beam.documents import DocumentStageFlags, FileUnitSizes
from pipelines.command.flags import AT_LEAST_1, ZERO_OR_MORE, option
from pipelines.text.bookdecode import MAX_LINE_BYTES

FORMATS = ("files", "lines")


@dataclass(frozen=True)
class BooksConfig(DocumentStageFlags, FileUnitSizes):
    """Every flag of `bertkit books`; the manifest records `recorded()`."""

    format: str = option(
        "files",
        help="files: one book per file; lines: one sentence per line (BookCorpus)",
        choices=FORMATS,
    )
    min_paragraph_words: int = option(
        3, help="drop paragraphs with fewer words", bounds=ZERO_OR_MORE
    )
    lines_per_document: int = option(
        1000,
        help="lines format, files without blank lines: cut a document every N lines",
        bounds=AT_LEAST_1,
    )
    unit_mb: int = option(
        64,
        help="group book files into units of work of about this many MB (0: one file each)",
        bounds=ZERO_OR_MORE,
    )
    max_line_kb: int = option(
        MAX_LINE_BYTES >> 10,
        help="reject a line over this many KiB (no sentence is that long)",
        bounds=AT_LEAST_1,
    )

    def recorded(self) -> dict[str, Any]:
        """What shapes the output, as the documents manifest records it."""
        return {
            "format": self.format,
            "min_paragraph_words": self.min_paragraph_words,
            "lines_per_document": self.lines_per_document,
            "unit_bytes": self.unit_bytes,
            "max_file_text_bytes": self.max_file_text_bytes,
            "max_line_bytes": self.max_line_bytes,
        }
