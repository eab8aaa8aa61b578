"""Reading documents files (Parquet, `schemas/documents.py`) one row group at a time.

The documents writer caps a row group at 1,000 documents or 8 MB of text, so whoever reads
a documents file this way (the vocabulary's sample, the example stage, `inspect`) holds one
bounded table at a time, however large the file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq


def iter_row_groups(source: BinaryIO, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """The row groups of an open, seekable Parquet file, in order, with only `columns`."""
    parquet = pq.ParquetFile(source)
    selected = list(columns) if columns is not None else None
    for group in range(parquet.num_row_groups):
        yield parquet.read_row_group(group, columns=selected)
