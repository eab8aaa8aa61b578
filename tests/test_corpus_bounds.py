"""`bertkit corpus` on Parquet cells larger than their limits: memory bounded by the limits.

Parquet's dictionary and run-length encodings store a huge repeated value in a few KB, so
a small file can hold a title, an id or rows of text of hundreds of MB. Every value is
measured from Arrow's offsets before it becomes a Python string: an id or a title over its
limit is a reject (id_too_long, title_too_long), a text over --max-line-kb is text_too_long,
and the rows under the limit are made Python strings a slice of at most 32 MiB at a time
from batches of 8 rows. What is left of a huge value is pyarrow decoding it once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pipelines import corpus

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
TEXT = "The river runs past the old mill every spring."

# The command in a child of a child: RUSAGE_CHILDREN is then that one run's peak alone.
_PEAK_RSS = """
import resource, subprocess, sys
code = subprocess.run([sys.executable, "-m", "bertkit", "corpus", *sys.argv[1:]]).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _peak_mb(table: pa.Table, directory: Path, *flags: str) -> tuple[int, int]:
    """(exit code, peak RSS in MB) of `bertkit corpus` on one Parquet file of `table`."""
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / "in.parquet")
    argv = ["--input", str(directory / "in.parquet"), "--output", str(directory / "out")]
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *argv, *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    code, peak = result.stdout.split()[-2:]
    return int(code), int(peak)


def _rejects(directory: Path) -> list[tuple[str, str, str | None, str]]:
    return [
        (r["position"], r["reason"], r["id"], r["error"])
        for path in sorted((directory / "out" / "_rejects").glob("*.jsonl"))
        for r in map(json.loads, path.read_text().splitlines())
    ]


def _documents(directory: Path) -> list[tuple[str, str]]:
    rows = ds.dataset(directory / "out").to_table(columns=["id", "title"]).to_pylist()
    return [(row["id"], row["title"]) for row in rows]


@pytest.fixture(scope="module")
def small_peak(tmp_path_factory) -> int:
    code, peak = _peak_mb(pa.table({"id": ["a"], "text": [TEXT]}), tmp_path_factory.mktemp("s"))
    assert code == 0
    return peak


def test_a_huge_title_is_rejected_unread(tmp_path: Path, small_peak: int) -> None:
    title = "ab " * (27 * MIB)  # 81 MiB of words, a few KB in the file
    table = pa.table({"id": ["a", "b"], "text": [TEXT, TEXT], "title": [title, " The  Mill "]})
    code, peak = _peak_mb(table, tmp_path, "--title-field", "title")
    # Over the one-record run's peak: 2.5 GB before (the title split into words and joined
    # whole before its 1,000-character cut), under 0.5 GB after (pyarrow decoding it once).
    assert (code, peak - small_peak < 500) == (0, True), (peak, small_peak)
    assert _rejects(tmp_path) == [
        (
            "row 0",
            "title_too_long",
            "corpus/a",
            f"'title' is {81 * MIB} bytes, over the 65536-byte limit for titles",
        )
    ]
    assert _documents(tmp_path) == [("corpus/b", "The Mill")]


def test_a_huge_id_is_rejected_unread(tmp_path: Path, small_peak: int) -> None:
    table = pa.table({"id": ["ab " * (27 * MIB), "b"], "text": [TEXT, TEXT]})
    code, peak = _peak_mb(table, tmp_path)
    # Over the small run's peak: 0.7 GB before (the id stored whole as a document id), under
    # 0.5 GB after.
    assert (code, peak - small_peak < 500) == (0, True), (peak, small_peak)
    assert _rejects(tmp_path) == [
        (
            "row 0",
            "id_too_long",
            "corpus/in.parquet:0",
            f"'id' is {81 * MIB} bytes, over the 4096-byte limit for ids",
        )
    ]
    assert _documents(tmp_path) == [("corpus/b", "b")]


def test_rows_under_the_limit_are_not_all_held_at_once(tmp_path: Path, small_peak: int) -> None:
    # 32 rows of 15 MiB (under the 16 MiB --max-line-kb), one word each: each is cut into
    # 1 Mi-character paragraphs of one word, all dropped as short. 480 MiB of text in all.
    table = pa.table({"text": ["x" * (15 * MIB)] * 32})
    code, peak = _peak_mb(table, tmp_path)
    # Over the small run's peak: 1.2 GB before (256 rows a batch, all of them Python
    # strings at once), under 0.5 GB after (8 rows a batch).
    assert (code, peak - small_peak < 500) == (0, True), (peak, small_peak)
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert manifest["counts"]["records"] == 32
    assert manifest["counts"]["input_text_bytes"] == 32 * 15 * MIB


@pytest.mark.slow
def test_a_500_mb_title(tmp_path: Path, small_peak: int) -> None:
    title = "ab " * (170 * MIB)  # 510 MiB of words
    table = pa.table({"id": ["a", "b"], "text": [TEXT, TEXT], "title": [title, "T"]})
    code, peak = _peak_mb(table, tmp_path, "--title-field", "title")
    # 10.2 GB once; then ~2 GB, pyarrow decoding the title's page whole; now the page's
    # header says 510 MiB, over the page limit (8 × --max-line-kb, at least 64 MiB), and its
    # row group (both rows) is one reject, never decompressed. No row kept: exit 1.
    assert (code, peak - small_peak < 300) == (1, True), (peak, small_peak)
    assert [(p, r) for p, r, _, _ in _rejects(tmp_path)] == [
        ("row group 0 (rows 0-1)", "page_too_large")
    ]


def test_a_nested_title_over_its_limit_is_a_reject(tmp_path: Path) -> None:
    meta = pa.array(
        [{"title": "w " * 40_000}, {"title": "The  Mill"}],
        pa.struct([("title", pa.string())]),
    )
    table = pa.table({"id": ["a", "b"], "text": [TEXT, TEXT], "meta": meta})
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "in.parquet")
    argv = ["--input", str(tmp_path / "in" / "in.parquet"), "--output", str(tmp_path / "out")]
    assert corpus.run([*argv, "--title-field", "meta.title"]) == 0
    assert _rejects(tmp_path) == [
        (
            "row 0",
            "title_too_long",
            "corpus/a",
            "'meta.title' is 80000 bytes, over the 65536-byte limit for titles",
        )
    ]
    assert _documents(tmp_path) == [("corpus/b", "The Mill")]
