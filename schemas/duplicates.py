"""The Duplicate record: a document `bertkit dedup` removed, and the one it duplicates.

`bertkit dedup` writes them as zstd Parquet under `DIR/_duplicates/` beside the documents it
kept (the leading underscore keeps them out of `pyarrow.dataset.dataset(DIR)`), and counts
them in the documents manifest's `dropped` (`exact_duplicate`, `near_duplicate`). Read them
with `pyarrow.dataset.dataset(DIR + "/_duplicates")` or DuckDB's
`read_parquet('DIR/_duplicates/*.parquet')`.
"""

from __future__ import annotations

import pyarrow as pa

DUPLICATES_DIR = "_duplicates"
DUPLICATES_FILE_GLOB = "duplicates-*.parquet"
DUPLICATE_SCHEMA_VERSION = "1.0"

# Why a document was removed: the same normalised text, or a MinHash-estimated Jaccard
# similarity of its word n-grams at or above the threshold.
EXACT = "exact_duplicate"
NEAR = "near_duplicate"
KINDS = (EXACT, NEAR)


class DuplicateColumn:
    """Column names of the Duplicate schema."""

    ID = "id"
    SOURCE = "source"
    INPUT = "input"
    DUPLICATE_OF = "duplicate_of"
    DUPLICATE_OF_SOURCE = "duplicate_of_source"
    DUPLICATE_OF_INPUT = "duplicate_of_input"
    KIND = "kind"
    SIMILARITY = "similarity"


DUPLICATE_SCHEMA = pa.schema(
    [
        pa.field(DuplicateColumn.ID, pa.string(), nullable=False, metadata={"doc": "removed"}),
        pa.field(DuplicateColumn.SOURCE, pa.string(), nullable=False),
        pa.field(
            DuplicateColumn.INPUT,
            pa.string(),
            nullable=False,
            metadata={
                "doc": "the documents directory it was read from, as the manifest's "
                "inputs[].path records it"
            },
        ),
        pa.field(
            DuplicateColumn.DUPLICATE_OF,
            pa.string(),
            nullable=False,
            metadata={"doc": "id of the earlier document it duplicates"},
        ),
        pa.field(DuplicateColumn.DUPLICATE_OF_SOURCE, pa.string(), nullable=False),
        pa.field(DuplicateColumn.DUPLICATE_OF_INPUT, pa.string(), nullable=False),
        pa.field(
            DuplicateColumn.KIND, pa.string(), nullable=False, metadata={"doc": " or ".join(KINDS)}
        ),
        pa.field(
            DuplicateColumn.SIMILARITY,
            pa.float64(),
            nullable=False,
            metadata={"doc": "estimated Jaccard similarity of the word n-grams (1.0: exact)"},
        ),
    ],
    metadata={"bertkit.record": "Duplicate", "bertkit.schema_version": DUPLICATE_SCHEMA_VERSION},
)
