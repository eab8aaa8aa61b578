"""`bertkit corpus` on Parquet row groups it cannot read whole: a page over the limit, damage.

pyarrow decompresses a page (or a dictionary page) whole, however large its writer made it,
so a few KB of zstd can take gigabytes. Before a row group is read, the page headers of each
column chunk it reads are walked (pipelines/corpus/pages.py): a row group with a
page over it is one `page_too_large` reject of its rows. Damage (a corrupt page, a page header
that is not Thrift) is one `corrupt_input` reject of the row group's unread rows, and the
file's other row groups are read. Most tests lower the 64 MiB floor of the limit, so that
`--max-line-kb 1` makes it 8 KiB (8 times the text limit) and the files stay small.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pipelines import corpus
from pipelines.beam.documents import UnitTally, read_manifest
from pipelines.corpus import CorpusConfig, parquet_documents
from pipelines.corpus import parquet as corpus_parquet
from pipelines.corpus.pages import PageHeaderError, chunk_pages, large_page

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
CONFIG = CorpusConfig(input=("in/*.parquet",), output="out", max_line_kb=1)


def short(row: int) -> str:
    return f"Row {row} holds a short sentence."


def long(row: int) -> str:
    """898 characters, under the 1 KiB text limit: ten of them make a page over 8 KiB."""
    return f"Row {row:03d} " + "word " * 178


def write(path: Path, groups: list[list[str]], **options) -> Path:
    """One row group a list of texts, ids r0, r1, … over the file."""
    with pq.ParquetWriter(path, SCHEMA, compression="zstd", **options) as writer:
        row = 0
        for texts in groups:
            ids = [f"r{row + n}" for n in range(len(texts))]
            writer.write_table(pa.table({"id": ids, "text": texts}, schema=SCHEMA))
            row += len(texts)
    return path


def read(path: Path, config: CorpusConfig = CONFIG) -> tuple[list[str], UnitTally]:
    tally = UnitTally("00000")
    ids = [doc.id for doc in parquet_documents(str(path), path.name, config, tally)]
    return ids, tally


def rejects(tally: UnitTally) -> list[tuple[str, str, str]]:
    return [(r.position, r.reason, r.error) for r in tally.rejects]


def text_pages(path: Path, group: int) -> list:
    """The pages of the text column's chunk in a row group, as the walk reads them."""
    chunk = pq.ParquetFile(path).metadata.row_group(group).column(1)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    with path.open("rb") as handle:
        return list(chunk_pages(handle, start, chunk.total_compressed_size))


@pytest.fixture
def small_floor(monkeypatch) -> None:
    """The page limit without its 64 MiB floor: 8 times --max-line-kb."""
    monkeypatch.setattr(corpus_parquet, "MIN_PAGE_LIMIT", 0)


THREE_GROUPS = [[short(0), short(1)], [long(n) for n in range(2, 12)], [short(12), short(13)]]


def test_the_walk_reads_the_pages_pyarrow_wrote(tmp_path: Path) -> None:
    # Statistics (the min and max texts, 900 bytes each) sit in each data page's header:
    # the walk skips them by their lengths. Pages of 4 rows, a dictionary page first.
    path = write(tmp_path / "x.parquet", THREE_GROUPS, data_page_size=1, write_batch_size=4)
    pages = text_pages(path, 1)
    assert [(p.kind, p.uncompressed) for p in pages] == [
        ("dictionary page", 9020),  # 10 texts of 898 bytes, each after its 4-byte length
        ("data page", 10),  # their numbers in the dictionary: rows 0-3, 4-7, 8-9
        ("data page", 11),
        ("data page", 12),
    ]
    no_dictionary = write(tmp_path / "y.parquet", THREE_GROUPS, use_dictionary=False)
    assert [(p.kind, p.uncompressed) for p in text_pages(no_dictionary, 1)] == [("data page", 9026)]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\x1e", "no Thrift type 14"),  # field 1 of type 14
        (b"\x1c" * 40, "structs nested over 32 deep"),
        (b"\x15\x00\x00", "a page header without its sizes"),  # field 1 = 0, then STOP
        (b"\x18\xff\xff\xff\xff\x0f", "a page header over 16,777,216 bytes"),  # a 4 GB binary
        (b"\x15", "the file ends inside a page header"),
        (b"\x15" + b"\xff" * 11, "a number over 10 bytes long"),
        (b"\x25\x01\x15\x00\x00", "a negative page size (-1, 0)"),  # fields 2 = -1, 3 = 0
    ],
)
def test_a_page_header_that_is_not_thrift_is_damage(data: bytes, error: str) -> None:
    with pytest.raises(PageHeaderError) as raised:
        large_page(io.BytesIO(data), 0, len(data), 1 << 20)
    assert str(raised.value) == error


def test_a_row_group_with_a_page_over_the_limit_is_one_reject(tmp_path, small_floor) -> None:
    path = write(tmp_path / "x.parquet", THREE_GROUPS, use_dictionary=False)
    ids, tally = read(path)
    assert ids == ["corpus/r0", "corpus/r1", "corpus/r12", "corpus/r13"]
    page = text_pages(path, 1)[0].offset
    assert rejects(tally) == [
        (
            "row group 1 (rows 2-11)",
            "page_too_large",
            f"row group 1 (rows 2-11): column 'text' holds a data page of 9,026 bytes once "
            f"decompressed (at byte {page}), over the 8,192-byte limit for a page (8 times "
            "--max-line-kb, at least 64 MiB): pyarrow decompresses a page whole, so the row "
            "group's 10 rows are skipped unread; --max-line-kb 2 reads them",
        )
    ]
    assert (tally.counts["rows_unread"], tally.counts["records"]) == (10, 4)
    assert tally.failed_inputs == []  # nothing is damaged: the command exits 0
    ids, tally = read(path, CorpusConfig(input=("x",), output="out", max_line_kb=2))
    assert (len(ids), tally.rejects) == (14, [])  # as the message says


def test_a_dictionary_page_over_the_limit(tmp_path, small_floor) -> None:
    path = write(tmp_path / "x.parquet", THREE_GROUPS)
    ids, tally = read(path)
    assert ids == ["corpus/r0", "corpus/r1", "corpus/r12", "corpus/r13"]
    ((position, reason, error),) = rejects(tally)
    assert (position, reason) == ("row group 1 (rows 2-11)", "page_too_large")
    assert "column 'text' holds a dictionary page of 9,020 bytes once decompressed" in error


def test_a_page_header_that_does_not_parse_fails_its_row_group(tmp_path, small_floor) -> None:
    path = write(tmp_path / "x.parquet", THREE_GROUPS, use_dictionary=False)
    data = bytearray(path.read_bytes())
    data[text_pages(path, 1)[0].offset] = 0x1E  # field 1 of Thrift type 14: no such type
    path.write_bytes(bytes(data))
    ids, tally = read(path)
    assert ids == ["corpus/r0", "corpus/r1", "corpus/r12", "corpus/r13"]
    assert rejects(tally) == [
        (
            "row group 1 (rows 2-11)",
            "corrupt_input",
            f"{path}: row group 1 (rows 2-11) is damaged: a page header of column 'text' "
            "does not parse: no Thrift type 14; the file's other row groups are read",
        )
    ]
    assert [f["input"] for f in tally.failed_inputs] == [str(path)]  # exit 1
    assert tally.counts["rows_unread"] == 10
    # A chunk under the limit is walked too (its footer's sizes are not trusted).
    ids, tally2 = read(path, CorpusConfig(input=("x",), output="out", max_line_kb=16))
    assert ids == ["corpus/r0", "corpus/r1", "corpus/r12", "corpus/r13"]
    assert rejects(tally2) == rejects(tally)


def test_a_corrupt_page_loses_only_its_row_group_from_it_on(tmp_path: Path) -> None:
    # Row group 1 in pages of 4 rows; its third data page's zstd data made garbage. The
    # first batch of 8 rows (pages 1 and 2) is read, then pyarrow meets the damage: rows
    # 10-21 are one reject, and row group 2 after it is read.
    groups = [[short(0), short(1)], [short(n) for n in range(2, 22)], [short(22), short(23)]]
    path = write(tmp_path / "x.parquet", groups, data_page_size=1, write_batch_size=4)
    third = [p for p in text_pages(path, 1) if p.kind == "data page"][2]
    data = bytearray(path.read_bytes())
    data[third.data_offset : third.data_offset + 4] = b"\0\0\0\0"  # no zstd frame's magic
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.parquet").write_bytes(bytes(data))
    out = tmp_path / "out"
    assert corpus.run(["--input", str(tmp_path / "in" / "x.parquet"), "--output", str(out)]) == 1
    manifest = read_manifest(str(out))
    ids = ds.dataset(out).to_table(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted(f"corpus/r{n}" for n in [*range(10), 22, 23])
    assert (manifest.rejected, manifest.counts["rows_unread"]) == ({"corrupt_input": 1}, 12)
    (reject,) = [
        json.loads(line)
        for path in sorted((out / "_rejects").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert reject["position"] == "row group 1 (rows 2-21)"
    assert reject["error"].startswith(
        f"{tmp_path / 'in' / 'x.parquet'}: row group 1 (rows 2-21) is damaged: pyarrow cannot "
        "read rows 10-21: "
    )
    assert reject["error"].endswith(
        "(rows 2-9 before the damage are kept); the file's other row groups are read"
    )


def test_float_ids_are_the_integers_pandas_wrote(tmp_path: Path) -> None:
    # pandas writes an integer column with nulls as float64: 7.0 is the id 7, as an integer
    # column gives it; null and NaN are no id (the row's place names it).
    texts = [short(n) for n in range(6)]
    ids = [7.0, math.nan, None, 2.5, 2.0**60, -3.0]
    pq.write_table(
        pa.table({"id": pa.array(ids, pa.float64()), "text": texts}), tmp_path / "f.parquet"
    )
    pq.write_table(
        pa.table({"id": pa.array([7, None, None], pa.int64()), "text": texts[:3]}),
        tmp_path / "i.parquet",
    )
    found, tally = read(tmp_path / "f.parquet")
    assert found == ["corpus/7", "corpus/f.parquet:1", "corpus/f.parquet:2", "corpus/-3"]
    assert [(r.position, r.reason, r.id, r.error) for r in tally.rejects] == [
        (
            "row 3",
            "id_not_string_or_int",
            "corpus/f.parquet:3",
            "'id' is a number, not a string or an integer (2.5, not a whole number)",
        ),
        (
            "row 4",
            "id_not_string_or_int",
            "corpus/f.parquet:4",
            "'id' is a number, not a string or an integer (1.152921504606847e+18, past "
            "2**53, where a float no longer holds every integer)",
        ),
    ]
    assert read(tmp_path / "i.parquet")[0] == [
        "corpus/7",
        "corpus/i.parquet:1",
        "corpus/i.parquet:2",
    ]


# The command in a child of a child: RUSAGE_CHILDREN is then that one run's peak alone.
_PEAK_RSS = """
import resource, subprocess, sys
code = subprocess.run([sys.executable, "-m", "bertkit", "corpus", *sys.argv[1:]]).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _peak_mb(path: Path, out: Path, *flags: str) -> tuple[int, int]:
    argv = ["--input", str(path), "--output", str(out), *flags]
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *argv], capture_output=True, text=True, cwd=ROOT
    )
    code, peak = result.stdout.split()[-2:]
    return int(code), int(peak)


def test_a_page_bomb_is_not_decompressed(tmp_path: Path) -> None:
    # One 84 MB page (840 texts of 100 KB) in a file of a few KB, then a row group of one
    # short row, read with the limit's 64 MiB floor (--max-line-kb 64: 8 times is 512 KiB).
    (tmp_path / "in").mkdir()
    small = write(tmp_path / "in" / "small.parquet", [[short(0)]])
    bomb = write(
        tmp_path / "in" / "bomb.parquet",
        [["w " * 50_000] * 840, [short(840)]],
        use_dictionary=False,
        data_page_size=1 << 30,
        write_batch_size=840,
    )
    assert bomb.stat().st_size < 20_000
    code, small_peak = _peak_mb(small, tmp_path / "small", "--max-line-kb", "64")
    assert code == 0
    code, peak = _peak_mb(bomb, tmp_path / "out", "--max-line-kb", "64")
    # Over the one-record run's peak: 168 MB before (the page decompressed and decoded,
    # its rows then rejected as text_too_long), 0 after (none of it read).
    assert (code, peak - small_peak < 40) == (0, True), (peak, small_peak)
    (reject,) = [
        json.loads(line)
        for path in (tmp_path / "out" / "_rejects").glob("*.jsonl")
        for line in path.open()
    ]
    assert (reject["position"], reject["reason"]) == ("row group 0 (rows 0-839)", "page_too_large")
    assert reject["error"] == (
        "row group 0 (rows 0-839): column 'text' holds a data page of 84,003,367 bytes once "
        f"decompressed (at byte {text_pages(bomb, 0)[0].offset}), over the 67,108,864-byte "
        "limit for a page (8 times --max-line-kb, at least 64 MiB): pyarrow decompresses a "
        "page whole, so the row group's 840 rows are skipped unread; --max-line-kb 10255 "
        "reads them"
    )
    assert read_manifest(str(tmp_path / "out")).counts["documents"] == 1
