"""`bertkit dedup`'s buckets and edges through spill files (pipelines/dedup/buckets.py): the
output does not depend on how many partitions the keys are spread over or how often a
buffer is written out, the spill files are gone once the manifest is written, and a run
that died leaving them is replaced with --overwrite."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import dedup
from pipelines.beam.files import OutputDirectoryError
from pipelines.dedup import buckets
from pipelines.dedup.candidates import Edge, Member
from schemas.duplicates import DuplicateColumn
from tests.conftest import s3_flags
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


def test_on_s3_the_spill_files_are_written_read_and_removed(
    s3_server, tmp_path, monkeypatch
) -> None:
    """Inputs and output on a loopback S3 server (moto), over many partitions: the same
    documents and reports as a local run, and no `_work/` object left."""
    endpoint, client = s3_server
    bucket = s3_server.bucket("dedup-spill")
    first, second = literal_inputs(tmp_path)
    for directory in (first, second):
        for path in directory.rglob("*"):
            if path.is_file():
                key = f"in/{directory.name}/{path.relative_to(directory)}"
                client.upload_file(str(path), bucket, key)
    monkeypatch.setattr(buckets, "PARTITION_BYTES", 30_000)  # 2 partitions
    assert run_dedup(tmp_path / "local", first, second) == 0
    argv = ["--documents", f"s3://{bucket}/in/first", f"s3://{bucket}/in/second"]
    assert dedup.run([*argv, "--output", f"s3://{bucket}/out", *s3_flags(endpoint)]) == 0
    listed = client.list_objects_v2(Bucket=bucket, Prefix="out/")["Contents"]
    remote = {
        item["Key"][len("out/") :]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        for item in listed
    }
    local = output_bytes(tmp_path / "local")
    assert sorted(remote) == sorted(local)
    assert not [name for name in remote if name.startswith("_work")]
    for name in local:
        if name.startswith("documents-"):
            assert remote[name] == local[name]
        if name.startswith("_duplicates/"):  # inputs: relative to a local output, absolute to s3
            places = [DuplicateColumn.INPUT, DuplicateColumn.DUPLICATE_OF_INPUT]
            tables = [pq.read_table(pa.BufferReader(data)) for data in (remote[name], local[name])]
            assert tables[0].drop(places) == tables[1].drop(places)
