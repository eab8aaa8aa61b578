"""`bertkit dedup`'s one config: every flag, its type, default and help, written once.

`pipelines.command.flags` makes the command line from this dataclass; the output's documents
manifest records what shapes the output (`recorded`), the LSH bands and rows included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.command.flags import AT_LEAST_1, Bounds, config_problem, option
from pipelines.dedup.lsh import choose_bands
from pipelines.io.places import repeated_place
from schemas import MANIFEST_NAME

# The most MinHash values a signature may hold: beyond it the signatures (carried through
# the shuffle once per band) cost more than the estimate gains.
MAX_NUM_PERM = 1024


# What --documents must be, for its help and for `stage_paths.StagePaths`' message.
DOCUMENTS_DIRS = (
    "documents",
    "documents directory written by `bertkit wikipedia`, `books`, `corpus` or `dedup`, the one "
    f"holding {MANIFEST_NAME}",
)


class DedupError(ValueError):
    """Flags or inputs `bertkit dedup` refuses before any work."""


@dataclass(frozen=True)
class DedupConfig:
    """Every flag of `bertkit dedup`; the manifest records `recorded()`."""

    documents: tuple[str, ...] = option(
        help=f"{DOCUMENTS_DIRS[1]}; repeatable, earlier directories' copies are kept",
        metavar="DIR",
    )
    output: str = option(help="documents directory to write")
    threshold: float = option(
        0.8,
        help="estimated Jaccard similarity of word n-grams at which a document is a near duplicate",
        bounds=Bounds(low=0, high=1, low_open=True),
    )
    ngram: int = option(5, help="words per shingle", bounds=AT_LEAST_1)
    num_perm: int = option(
        128, help="MinHash values per signature", bounds=Bounds(low=2, high=MAX_NUM_PERM)
    )
    seed: int = option(1, help="seeds the MinHash permutations", bounds=Bounds(low=0))
    file_mb: int = option(
        256, help="start a new Parquet file after this many MB of text", bounds=AT_LEAST_1
    )
    overwrite: bool = option(
        False, help="replace the outputs and manifest of an earlier run in --output"
    )

    @property
    def bands_rows(self) -> tuple[int, int]:
        return choose_bands(self.threshold, self.num_perm)

    @property
    def max_file_text_bytes(self) -> int:
        return round(self.file_mb * (1 << 20))

    def validate(self) -> None:
        """Stop before any work on flags that cannot give a deduplicated directory."""
        if not self.documents:
            raise DedupError("no documents directory given: pass --documents DIR [DIR …]")
        problem = config_problem(self)
        if problem:
            raise DedupError(problem)
        repeated = repeated_place(self.documents)
        if repeated:
            raise DedupError(
                f"{repeated}: each of its documents would duplicate itself; name each "
                "directory once"
            )

    def recorded(self) -> dict[str, Any]:
        """What shapes the output, as the documents manifest records it."""
        bands, rows = self.bands_rows
        return {
            "threshold": self.threshold,
            "ngram": self.ngram,
            "num_perm": self.num_perm,
            "seed": self.seed,
            "bands": bands,
            "rows": rows,
            "normalisation": "nfkc casefold, punctuation dropped, whitespace collapsed",
            "max_file_text_bytes": self.max_file_text_bytes,
        }
