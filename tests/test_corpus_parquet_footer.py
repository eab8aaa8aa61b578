"""`bertkit corpus` on Parquet files whose footer says what their pages do not.

A footer is metadata its writer (or damage) may get wrong; the page headers are what pyarrow
reads. The tests rewrite one number of a real file's footer in place: a Thrift compact i64
field is its header byte then a zigzag varint, and the new value is chosen to take as many
bytes as the old, so the footer keeps its length and every other field.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.corpus import CorpusConfig
from pipelines.corpus import parquet as corpus_parquet
from tests.test_corpus_parquet_pages import SCHEMA, read, rejects

# ColumnMetaData's fields as the compact protocol writes them after the field before:
# total_uncompressed_size (6) and total_compressed_size (7), each one after the last (delta
# 1, type i64: 0x16); data_page_offset (9) two after total_compressed_size (0x26).
SIZE_FIELD = b"\x16"
DATA_PAGE_OFFSET_FIELD = b"\x26"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        if value < 0x80:
            return bytes(out + bytes([value]))
        out.append((value & 0x7F) | 0x80)
        value >>= 7


def _zigzag(value: int) -> bytes:
    return _varint((value << 1) ^ (value >> 63))


def i64(header: bytes, value: int) -> bytes:
    """An i64 field as the footer holds it."""
    return header + _zigzag(value)


def rewrite_footer(path: Path, before: bytes, after: bytes) -> None:
    """The one place in the footer that holds `before`, made `after` (of the same length)."""
    data = path.read_bytes()
    length = struct.unpack("<I", data[-8:-4])[0]
    footer = data[-8 - length : -8]
    assert (footer.count(before), len(after)) == (1, len(before))
    path.write_bytes(data[: -8 - length] + footer.replace(before, after) + data[-8:])


def text(row: int) -> str:
    """898 characters: ten of them make a page of 9,026 bytes, over 8 KiB."""
    return f"Row {row:03d} " + "word " * 178


def write(path: Path, rows: int, **options) -> Path:
    table = pa.table({"id": [f"r{n}" for n in range(rows)], "text": [text(n) for n in range(rows)]})
    pq.write_table(table.cast(SCHEMA), path, use_dictionary=False, **options)
    return path


@pytest.fixture
def small_floor(monkeypatch) -> None:
    """The page limit without its 64 MiB floor: 8 times --max-line-kb."""
    monkeypatch.setattr(corpus_parquet, "MIN_PAGE_LIMIT", 0)


def test_a_footer_that_understates_a_chunk_does_not_hide_its_large_page(
    tmp_path: Path, small_floor
) -> None:
    # The text chunk's page is 9,026 bytes once decompressed, over the 8 KiB limit; the
    # footer says the whole chunk is 8,192 bytes, at the limit. Before, such a chunk was not
    # walked and its page was decompressed.
    path = write(tmp_path / "x.parquet", 10, compression="zstd")
    chunk = pq.read_metadata(path).row_group(0).column(1)
    rewrite_footer(path, i64(SIZE_FIELD, chunk.total_uncompressed_size), i64(SIZE_FIELD, 8192))
    assert pq.read_metadata(path).row_group(0).column(1).total_uncompressed_size == 8192
    ids, tally = read(path)
    assert ids == []
    assert rejects(tally) == [
        (
            "row group 0 (rows 0-9)",
            "page_too_large",
            f"row group 0 (rows 0-9): column 'text' holds a data page of 9,026 bytes once "
            f"decompressed (at byte {chunk.data_page_offset}), over the 8,192-byte limit for "
            "a page (8 times --max-line-kb, at least 64 MiB): pyarrow decompresses a page "
            "whole, so the row group's 10 rows are skipped unread; --max-line-kb 2 reads them",
        )
    ]
    assert (tally.counts["rows_unread"], tally.failed_inputs) == (10, [])


def test_pages_that_run_past_the_chunk_its_footer_gives_are_damage(tmp_path: Path) -> None:
    # Row groups of 10 and 8 rows, stored uncompressed: row group 0's text chunk is said to
    # be 8,192 bytes stored, but its one page runs on past them. Row group 1 is read.
    path = write(tmp_path / "x.parquet", 18, compression="none", row_group_size=10)
    chunk = pq.read_metadata(path).row_group(0).column(1)
    start, size = chunk.data_page_offset, chunk.total_compressed_size
    sizes = i64(SIZE_FIELD, chunk.total_uncompressed_size)  # field 6, then field 7
    rewrite_footer(path, sizes + i64(SIZE_FIELD, size), sizes + i64(SIZE_FIELD, 8192))
    ids, tally = read(path, CorpusConfig(input=("x",), output="out", max_line_kb=2))
    assert ids == [f"corpus/r{n}" for n in range(10, 18)]
    assert rejects(tally) == [
        (
            "row group 0 (rows 0-9)",
            "corrupt_input",
            f"{path}: row group 0 (rows 0-9) is damaged: the pages of column 'text' run to "
            f"byte {start + size:,}, past the end its footer gives (byte {start + 8192:,}): the "
            "footer does not describe them; the file's other row groups are read",
        )
    ]
    assert [f["input"] for f in tally.failed_inputs] == [str(path)]  # exit 1
    assert tally.counts["rows_unread"] == 10


def test_a_chunk_placed_outside_the_file_is_damage(tmp_path: Path) -> None:
    path = write(tmp_path / "x.parquet", 20, compression="none", row_group_size=10)
    metadata = pq.read_metadata(path)
    chunk = metadata.row_group(1).column(1)
    offset = DATA_PAGE_OFFSET_FIELD
    rewrite_footer(path, i64(offset, chunk.data_page_offset), i64(offset, -10_000))
    ids, tally = read(path, CorpusConfig(input=("x",), output="out", max_line_kb=2))
    assert ids == [f"corpus/r{n}" for n in range(10)]
    data_end = path.stat().st_size - 8 - metadata.serialized_size
    assert rejects(tally) == [
        (
            "row group 1 (rows 10-19)",
            "corrupt_input",
            f"{path}: row group 1 (rows 10-19) is damaged: the footer places column 'text''s "
            f"{chunk.total_compressed_size:,} bytes at byte -10,000, outside the file's pages "
            f"(bytes 4 to {data_end:,}); the file's other row groups are read",
        )
    ]


def write_groups(path: Path, sizes: list[int]) -> Path:
    """Row groups of the given sizes (so that each has a total_byte_size of its own)."""
    with pq.ParquetWriter(path, SCHEMA, compression="none", use_dictionary=False) as writer:
        row = 0
        for size in sizes:
            rows = range(row, row + size)
            table = pa.table({"id": [f"r{n}" for n in rows], "text": [text(n) for n in rows]})
            writer.write_table(table.cast(SCHEMA))
            row += size
    return path


@pytest.mark.parametrize("claimed", [0, -5, 9])
def test_a_row_group_whose_footer_miscounts_its_rows_is_one_reject(
    tmp_path: Path, claimed: int
) -> None:
    # Row group 1 holds 7 rows (its chunks say 7 values); its footer's num_rows says
    # otherwise. Before, 0 or -5 skipped it without a word (7 records lost, while pyarrow
    # reads them); now it is damage, one reject of its 7 rows, numbered as pyarrow numbers
    # them, and the rows after it keep their numbers.
    path = write_groups(tmp_path / "x.parquet", [10, 7, 13])
    size = pq.read_metadata(path).row_group(1).total_byte_size
    # RowGroup: total_byte_size (field 2) then num_rows (field 3), each an i64 one after the last
    rewrite_footer(
        path,
        i64(SIZE_FIELD, size) + i64(SIZE_FIELD, 7),
        i64(SIZE_FIELD, size) + i64(SIZE_FIELD, claimed),
    )
    assert pq.read_metadata(path).row_group(1).num_rows == claimed
    ids, tally = read(path, CorpusConfig(input=("x",), output="out", max_line_kb=2))
    assert ids == [f"corpus/r{n}" for n in [*range(10), *range(17, 30)]]
    assert rejects(tally) == [
        (
            "row group 1 (rows 10-16)",
            "corrupt_input",
            f"{path}: row group 1 (rows 10-16) is damaged: its footer says it holds {claimed} "
            "rows, but its column 'text' holds 7 values: the footer is damaged, so the row "
            "group is not read; the file's other row groups are read",
        )
    ]
    assert (tally.counts["rows_unread"], tally.counts["records"]) == (7, 23)
    assert [f["input"] for f in tally.failed_inputs] == [str(path)]  # exit 1
    ids, tally = read(write_groups(tmp_path / "empty.parquet", [2, 0, 1]))
    assert (ids, tally.rejects) == (["corpus/r0", "corpus/r1", "corpus/r2"], [])
