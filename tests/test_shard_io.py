"""The shard writer's tar bytes and the verifying reader, on literal samples."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from pipelines.beam.shards import write_shard
from pipelines.io.shards import (
    ShardReadError,
    iter_tar_samples,
    read_shard_samples,
    tar_bytes,
)

SAMPLES = [("000000000000", b"first"), ("000000000001", b"x" * 600)]


def test_tar_is_standard_and_fixed_byte_for_byte():
    data = tar_bytes(SAMPLES)
    # 2 headers + "first" padded to 512 + 600 bytes padded to 1024 + 2 end blocks.
    assert len(data) == 512 + 512 + 512 + 1024 + 1024
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = archive.getmembers()
        assert [(m.name, m.size, m.mtime, m.mode, m.uid, m.uname) for m in members] == [
            ("000000000000.example.bin", 5, 0, 0o444, 0, ""),
            ("000000000001.example.bin", 600, 0, 0o444, 0, ""),
        ]
        assert archive.extractfile(members[1]).read() == b"x" * 600
    assert tar_bytes(SAMPLES) == data  # no clock, user or host in the bytes


def test_write_shard_is_atomic_and_describes_itself(tmp_path):
    info = write_shard(str(tmp_path), "shard-000000.tar", SAMPLES)
    data = (tmp_path / "shard-000000.tar").read_bytes()
    assert (info.samples, info.bytes, info.sha256, info.first_key) == (
        2, len(data), hashlib.sha256(data).hexdigest(), "000000000000",
    )  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == ["shard-000000.tar"]  # no temporary left


@pytest.mark.parametrize("cut", [512 + 512, 2560, 2600])
def test_a_shard_cut_anywhere_is_an_error_naming_it(cut):
    data = tar_bytes(SAMPLES)[:cut]  # at a member boundary, after the last member, mid-data
    with pytest.raises(ShardReadError, match=r"shard-000007\.tar: .*truncated"):
        list(read_shard_samples(io.BytesIO(data), "shard-000007.tar"))


def test_a_changed_byte_fails_the_manifest_check(tmp_path):
    info = write_shard(str(tmp_path), "s.tar", SAMPLES)
    data = bytearray((tmp_path / "s.tar").read_bytes())
    data[600] ^= (
        1  # in the padding after the first sample: tar still reads, the sha256 does not match
    )
    with pytest.raises(ShardReadError, match="does not match the manifest"):
        list(read_shard_samples(io.BytesIO(bytes(data)), "s.tar", info))
    assert list(read_shard_samples(io.BytesIO(tar_bytes(SAMPLES)), "s.tar", info)) == SAMPLES


@pytest.mark.parametrize("chunk", [1, 511, 512, 700, 1 << 20])
def test_reader_takes_any_read_size(chunk):
    # Reads that end inside a header, a payload or its padding give the same samples.
    samples = [(f"{i:012d}", bytes([i]) * (i * 97)) for i in range(12)]
    data = tar_bytes(samples)
    assert list(iter_tar_samples(io.BytesIO(data), "s.tar", chunk_bytes=chunk)) == samples


def test_reader_skips_pax_headers_and_refuses_foreign_members():
    pax = io.BytesIO()
    with tarfile.open(fileobj=pax, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo("000000000000.example.bin")
        info.size, info.pax_headers = 3, {"comment": "é"}  # a non-ASCII field forces a pax header
        archive.addfile(info, io.BytesIO(b"abc"))
        other = tarfile.TarInfo("000000000001.txt")
        other.size = 1
        archive.addfile(other, io.BytesIO(b"x"))
    stream = iter_tar_samples(io.BytesIO(pax.getvalue()), "p.tar")
    assert next(stream) == ("000000000000", b"abc")
    with pytest.raises(ShardReadError, match=r"p\.tar: member '000000000001\.txt' is not a bertkit"):
        next(stream)


def test_reader_refuses_a_damaged_header():
    data = bytearray(tar_bytes(SAMPLES))
    data[1024 + 10] ^= 0xFF  # the second member's name: its header checksum no longer adds up
    stream = iter_tar_samples(io.BytesIO(bytes(data)), "d.tar")
    assert next(stream) == SAMPLES[0]
    with pytest.raises(ShardReadError, match=r"d\.tar: bad tar header checksum after sample 000000000000"):
        next(stream)
