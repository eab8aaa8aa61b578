"""`bertkit corpus` on the Arrow types a Parquet file's text, id and title columns may hold.

pyarrow reads a column as the type its writer recorded in the file's Arrow schema: a
string_view column (Polars and DuckDB's Arrow export write them) comes back as string_view,
which Arrow's compute functions (`binary_length`) have no kernel for. Such a column is a
column of strings like any other: cast once a batch, measured, read.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.beam.documents import UnitTally
from pipelines.corpus import CorpusConfig, parquet_documents


def read(path: Path, config: CorpusConfig) -> tuple[list[tuple[str, str]], UnitTally]:
    tally = UnitTally("00000")
    docs = [(d.id, d.title) for d in parquet_documents(str(path), path.name, config, tally)]
    return docs, tally


def test_string_view_columns_are_read_as_strings(tmp_path: Path) -> None:
    # Before, every row group of such a file was called damaged (corrupt_input: "Function
    # 'binary_length' has no kernel matching input types (string_view)"), exit 1.
    view = pa.string_view()
    table = pa.table(
        {
            "id": pa.array(["a", "b", "c" * 5000], view),
            "text": pa.array(["One short sentence here.", "Another one here.", "A third."], view),
            "title": pa.array(["First", None, "Third"], view),
        }
    )
    path = tmp_path / "view.parquet"
    pq.write_table(table, path)
    assert pq.ParquetFile(path).schema_arrow.field("text").type == view
    config = CorpusConfig(input=("x",), output="out", title_field="title", max_line_kb=1)
    docs, tally = read(path, config)
    assert docs == [("corpus/a", "First"), ("corpus/b", "b")]
    assert [(r.position, r.reason, r.error) for r in tally.rejects] == [
        ("row 2", "id_too_long", "'id' is 5000 bytes, over the 4096-byte limit for ids")
    ]
    assert (tally.failed_inputs, tally.counts["records"]) == ([], 3)
