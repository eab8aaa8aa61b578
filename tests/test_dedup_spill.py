"""`bertkit dedup`'s buckets and edges through spill files (pipelines/dedup/buckets.py): the
output does not depend on how many partitions the keys are spread over or how often a
buffer is written out, the spill files are gone once the manifest is written, and a run
that died leaving them is replaced with --overwrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.beam.files import OutputDirectoryError
from pipelines.dedup import buckets
from pipelines.dedup.candidates import Edge, Member
from tests.test_dedup import literal_inputs, output_bytes, run_dedup


def test_member_and_edge_records_read_back_exactly() -> None:
    member = Member(1, 2, 3, "wiki/é", "wiki", b"\x01\x02\x03\x04")
    record = buckets.pack_member(False, b"\x00\x07" + b"k" * 8, member)
    assert buckets._unpack_member(record) == member
    assert buckets._bucket_of(record) == b"\x01\x0a" + b"\x00\x07" + b"k" * 8
    edge = Edge(1, 0, 4, 9, "books/a", "books", 0.8515625)
    assert buckets._unpack_edge(buckets.pack_edge(17, edge)) == (17, edge)


def test_many_partitions_and_small_buffers_write_the_same_bytes(tmp_path, monkeypatch) -> None:
    first, second = literal_inputs(tmp_path)
    assert run_dedup(tmp_path / "one", first, second) == 0
    monkeypatch.setattr(buckets, "PARTITION_BYTES", 1_000)  # a partition per ~1 document
    monkeypatch.setattr(buckets, "SPILL_BUDGET_BYTES", 100)  # a spill file per record
    assert buckets.partitions(8, 12, 128) == 56  # 8 documents, 12 bands of 512-byte signatures
    assert run_dedup(tmp_path / "many", first, second) == 0
    assert output_bytes(tmp_path / "many") == output_bytes(tmp_path / "one")
    assert not (tmp_path / "many" / "_work").exists()


def test_spill_files_of_a_run_that_died_need_overwrite(tmp_path: Path) -> None:
    first, _ = literal_inputs(tmp_path)
    out = tmp_path / "out"
    left = [
        out / "_work" / "buckets" / "p00003" / "000-00001-00000.bin",
        out / "_work" / "edges" / "000-00001" / "p00003-00000.bin",
    ]
    for path in left:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"x")
    with pytest.raises(OutputDirectoryError, match="--overwrite"):
        run_dedup(out, first)
    assert run_dedup(out, first, flags=("--overwrite",)) == 0
    assert not (out / "_work").exists()
