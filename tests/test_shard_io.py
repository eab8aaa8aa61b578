"""The shard writer's tar bytes and the verifying reader, on literal samples."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from pipelines.shard_io import ShardReadError, read_shard_samples, tar_bytes, write_shard

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
