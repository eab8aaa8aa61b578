"""`bertkit wikipedia`'s one config: every flag, its type, default and help, written once.

`pipelines.command.flags` makes the command line from this dataclass (the flags every
documents stage shares come from `DocumentStageFlags`); the documents manifest records what
shapes the output (`recorded`), in bytes, as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.beam.documents import DocumentStageFlags
from pipelines.command.flags import ZERO_OR_MORE, option


@dataclass(frozen=True)
class WikipediaConfig(DocumentStageFlags):
    """Every flag of `bertkit wikipedia`; the manifest records `recorded()`."""

    min_paragraph_words: int = option(
        5, help="drop paragraphs with fewer words", bounds=ZERO_OR_MORE
    )
    split_mb: int = option(
        64,
        help="cut multistream dumps into splits of about this many compressed MB (0: one "
        "split per bz2 stream)",
        bounds=ZERO_OR_MORE,
    )

    @property
    def split_bytes(self) -> int:
        return round(self.split_mb * (1 << 20))

    @property
    def max_file_text_bytes(self) -> int:
        return round(self.file_mb * (1 << 20))

    def recorded(self) -> dict[str, Any]:
        """What shapes the output, as the documents manifest records it."""
        return {
            "min_paragraph_words": self.min_paragraph_words,
            "split_bytes": self.split_bytes,
            "max_file_text_bytes": self.max_file_text_bytes,
        }
