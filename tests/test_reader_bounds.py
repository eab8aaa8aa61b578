"""What a reader takes from its input is bounded by the format, not by what the input claims:
a block's sample count, a tar member's size, a JSON record's depth, a
file that is not a regular file, and a shard list without a manifest.

Each test builds the hostile input with the real writer's pieces and checks the exact error:
one line naming the file, the place in it and the fix, raised before the claim costs memory,
a wait or a full read.
"""

from __future__ import annotations

import hashlib
import io
import os
import signal
import tracemalloc
from pathlib import Path
from typing import ClassVar

import pytest

from pipelines.io import storage
from pipelines.io.retry import RetryPolicy, range_opener
from pipelines.io.shards import (
    ShardReadError,
    iter_tar_samples,
    read_verified_samples,
    tar_archive,
    tar_member,
    ustar_header,
)
from schemas.checks import RecordError
from schemas.examples import (
    SHARDS_MANIFEST_NAME,
    ExampleDecodeError,
    pack_samples,
    unpack_samples,
)
from schemas.shards import BlockTableFile, ShardBlock, ShardInfo, ShardsManifest
from schemas.versions import read_record
from schemas.vocab import VocabMetadata
from tests.test_inspect import TRAIN_SHARD, inspect, write_shards, write_vocab

TABLE = TRAIN_SHARD + ".blocks.json"


@pytest.fixture
def shards_dir(tmp_path: Path) -> Path:
    vocab_dir = tmp_path / "vocab"
    return write_shards(tmp_path, str(vocab_dir), write_vocab(vocab_dir))


@pytest.fixture
def no_hang():
    """A read that blocks for ever fails the test after 20 s instead of hanging the suite."""

    class Hung(BaseException):  # not an OSError, which a reader would retry
        pass

    def hung(*_args: object) -> None:
        raise Hung("blocked for 20 s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _entry(path: str, data: bytes, samples: int) -> ShardInfo:
    """A manifest entry that matches `data` (a hostile writer's: every checksum agrees)."""
    digest = hashlib.sha256(data).hexdigest()
    return ShardInfo(path, samples, len(data), digest, f"{0:012d}", 512, (ShardBlock(0, digest),))


# --------------------------------------------------------------------------- a: sample counts


def test_a_block_claiming_more_samples_than_the_format_allows_is_refused_unread() -> None:
    # 1,000,000 zero-length samples in 4 MB: a bytes object each (~40 MB) before this fix
    block = pack_samples([b""] * 1_000_000)
    with pytest.raises(ExampleDecodeError) as error:
        unpack_samples(block)
    assert str(error.value) == "a block of 1,000,000 samples, and a block holds at most 512"
    data, _ = tar_archive([tar_member(f"{0:012d}.examples.bin", block)])
    info = _entry(TRAIN_SHARD, data, 512)
    tracemalloc.start()
    with pytest.raises(ShardReadError) as error:
        list(read_verified_samples(lambda start, end: io.BytesIO(data[start:end]), "s.tar", info))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(error.value) == (
        "s.tar: member '000000000000.examples.bin': a block of 1,000,000 samples, and a block "
        "holds at most 512"
    )
    assert peak < 6 * len(data)  # the block's bytes and their copies, no object per sample


def test_a_manifest_entry_with_blocks_over_the_format_bound_is_refused() -> None:
    data, _ = tar_archive([tar_member(f"{0:012d}.examples.bin", pack_samples([b"x"] * 3))])
    info = _entry("seq128/train/shard-000000.tar", data, 3)
    wide = ShardInfo(**{**_fields(info), "block_samples": 1_000_000})
    with pytest.raises(RecordError) as error:
        _manifest_with(wide).validate()
    assert str(error.value) == (
        "outputs.seq128.splits.train.shards[0].block_samples is 1000000: it must be at least 1 "
        "and at most 512"
    )
    huge = ShardInfo(**{**_fields(info), "bytes": 10**12})  # one block of a terabyte
    with pytest.raises(RecordError) as error:
        _manifest_with(huge).validate()
    assert str(error.value) == (
        "outputs.seq128.splits.train.shards[0].blocks[0]: 1,000,000,000,000 bytes (from byte 0), "
        "more than any block of 512 samples takes (403,184,640)"
    )
    table = ShardInfo(
        **{**_fields(info), "blocks": (), "block_table": BlockTableFile(200 << 20, "0" * 64)}
    )
    with pytest.raises(RecordError) as error:  # 3 samples: one block, a table of 154 bytes at most
        _manifest_with(table).validate()
    assert str(error.value) == (
        "outputs.seq128.splits.train.shards[0].block_table.bytes is 209715200: it must be at "
        "least 1 and at most 154"
    )


def _fields(info: ShardInfo) -> dict:
    return {name: getattr(info, name) for name in ShardInfo.__slots__}


def _manifest_with(info: ShardInfo) -> ShardsManifest:
    from schemas.shards import SequenceOutput, SplitShards

    split = SplitShards(samples=info.samples, not_next=0, tokens=0, predictions=0, shards=[info])
    return ShardsManifest(
        vocab={},
        inputs=[],
        config={},
        layout={},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={"seq128": SequenceOutput(128, 20, {"train": split})},
    )


# --------------------------------------------------------------------------- b: member sizes

HUGE = 8**12 - 1  # the most a ustar size field holds: 68,719,476,735 bytes


def _huge_member_shard() -> bytes:
    header = ustar_header(f"{0:012d}.examples.bin", 0)
    header = bytearray(header)
    header[124:136] = b"%012o" % HUGE  # 12 octal digits, no room for a NUL
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header) + b"\0" * 1024


def test_a_tar_member_claiming_more_than_the_file_holds_is_refused_before_reading(
    tmp_path: Path, capsys
) -> None:
    shard = tmp_path / "alone" / "shard-000000.tar"  # no manifest: read unverified
    shard.parent.mkdir()
    shard.write_bytes(_huge_member_shard())
    code, lines, err = inspect(capsys, str(shard), "--json", "1")  # MemoryError before
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: {shard}: member '000000000000.examples.bin' at byte 0 claims "
        "68,719,476,735 bytes, more than the 1,024 bytes left in it after the header; the "
        "shard is corrupt or not a bertkit shard: rebuild it or restore it from the source\n"
    )


def test_a_tar_member_of_a_stream_of_unknown_size_is_bounded_by_the_largest_block() -> None:
    with pytest.raises(ShardReadError) as error:
        next(iter_tar_samples(io.BytesIO(_huge_member_shard()), "http://h/shard-000000.tar"))
    assert str(error.value) == (
        "http://h/shard-000000.tar: member '000000000000.examples.bin' at byte 0 claims "
        "68,719,476,735 bytes, more than the 402,658,312 bytes of the largest block of "
        "samples; the shard is corrupt or not a bertkit shard: rebuild it or restore it from "
        "the source"
    )


def test_read_exactly_never_asks_a_stream_for_what_a_size_claims() -> None:
    class Recording(io.BytesIO):
        asked: ClassVar[list[int]] = []

        def read(self, size: int = -1) -> bytes:
            self.asked.append(size)
            return super().read(size)

    stream = Recording(b"x" * (10 << 20))
    assert len(storage.read_exactly(stream, HUGE)) == 10 << 20
    assert stream.asked == [8 << 20, 8 << 20, 8 << 20]  # not one read of 68 GB


# --------------------------------------------------------------------------- c: deep JSON

DEEP = "[" * 100_000


def test_deep_json_is_one_error_naming_the_file(shards_dir: Path, capsys) -> None:
    manifest = shards_dir / SHARDS_MANIFEST_NAME
    manifest.write_text(DEEP)
    code, _, err = inspect(capsys, str(shards_dir))  # RecursionError traceback before
    assert code == 1
    assert err == (
        f"bertkit inspect: error: {manifest}: not a ShardsManifest (RecordError: JSON nested "
        "too deep to parse (maximum recursion depth exceeded while decoding a JSON array from "
        "a unicode string); a bertkit record is at most 32 levels deep); it was written by "
        "another tool or another bertkit version, or it was cut short\n"
    )
    with pytest.raises(ValueError) as error:  # vocab.json, as every record, through read_record
        read_record(VocabMetadata, '{"a":' * 40 + "1" + "}" * 40, "v/vocab.json", "rebuild it")
    assert str(error.value) == (
        "v/vocab.json: not a valid VocabMetadata (RecordError: JSON nested more than 32 levels "
        "deep; a bertkit record is never that deep); rebuild it"
    )


def test_a_deep_block_table_is_one_error_naming_the_shard_and_its_table(tmp_path: Path) -> None:
    from pipelines.beam.shards import write_shard

    entry = write_shard(str(tmp_path), "shard-000000.tar", [(f"{0:012d}", b"sample")])
    table = (DEEP[:100] + "]" * 100).encode()  # 100 deep: parsed, then refused by depth
    (tmp_path / "shard-000000.tar.blocks.json").write_bytes(table)
    entry = ShardInfo(
        **{
            **_fields(entry),
            "block_table": BlockTableFile(len(table), hashlib.sha256(table).hexdigest()),
        }
    )
    url = str(tmp_path / "shard-000000.tar")
    tables = range_opener(url + ".blocks.json", RetryPolicy())
    with pytest.raises(ShardReadError) as error:
        list(read_verified_samples(range_opener(url, RetryPolicy()), url, entry, 0, 1, tables))
    assert str(error.value) == (
        f"{url}: its block table shard-000000.tar.blocks.json: not a block table (JSON nested "
        "more than 32 levels deep; a bertkit record is never that deep); rebuild the shards"
    )
    from schemas.checks import load_json  # the one parse of input JSON

    with pytest.raises(RecordError, match=r"^JSON nested too deep to parse"):
        load_json(DEEP.encode())


# --------------------------------------------------------------------------- d: not a file


def test_a_block_table_that_is_a_fifo_is_refused_at_once(shards_dir: Path, capsys, no_hang):
    table = shards_dir / TABLE
    table.unlink()
    os.mkfifo(table)
    code, _, err = inspect(capsys, str(shards_dir), "--json", "1")  # blocked for ever before
    assert code == 1
    assert err == (
        f"bertkit inspect: error: {shards_dir / TRAIN_SHARD}: its block table "
        f"shard-000000.tar.blocks.json: {table} is a named pipe (FIFO), not a regular file: "
        "bertkit reads what it wrote only from regular files; put the file bertkit wrote there\n"
    )


def test_a_block_table_that_is_a_directory_is_not_retried(shards_dir: Path, capsys) -> None:
    table = shards_dir / TABLE
    table.unlink()
    table.mkdir()
    code, _, err = inspect(capsys, str(shards_dir), "--json", "1")  # five tries over 15 s before
    assert code == 1
    assert err == (
        f"bertkit inspect: error: {shards_dir / TRAIN_SHARD}: its block table "
        f"shard-000000.tar.blocks.json: {table} is a directory, not a regular file: bertkit "
        "reads what it wrote only from regular files; put the file bertkit wrote there\n"
    )


def test_a_manifest_or_a_shard_that_is_not_a_file_is_named_so(
    shards_dir: Path, capsys, no_hang
) -> None:
    manifest = shards_dir / SHARDS_MANIFEST_NAME
    manifest.unlink()
    os.mkfifo(manifest)
    code, _, err = inspect(capsys, str(shards_dir))  # "neither manifest.json …" before
    assert (code, err) == (
        1,
        (
            f"bertkit inspect: error: {manifest} is a named pipe (FIFO), not a regular file: "
            "bertkit reads what it wrote only from regular files; put the file bertkit wrote there\n"
        ),
    )
    with pytest.raises(storage.NotAFileError, match=r"^/dev/null is a character device, not a"):
        storage.open_binary("/dev/null")


# --------------------------------------------------------------------------- e: no manifest


def test_shards_without_a_manifest_are_not_read_before_the_trainer_refuses(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from tests.test_data import SHARD_SIZES, write_uneven_shards
    from trainer import source as shard_source
    from trainer import train

    shards_dir = write_uneven_shards(tmp_path)
    (shards_dir / SHARDS_MANIFEST_NAME).unlink()
    pattern = str(shards_dir / "seq128/train/shard-{000000..000004}.tar")
    opened: list[str] = []
    real_open = storage.open_binary
    monkeypatch.setattr(storage, "open_binary", lambda url: opened.append(url) or real_open(url))
    code = train.run(
        [
            "--shards",
            pattern,
            "--output",
            str(tmp_path / "run"),
            "--model",
            "tiny",
            "--max-steps",
            "1",
            "--warmup-steps",
            "0",
            "--num-workers",
            "0",
        ]
    )
    assert code == 2 and opened == []  # every shard read in full before
    assert capsys.readouterr().err.endswith(
        f"bertkit train: error: {shards_dir}/seq128/train/shard-000000.tar: no manifest.json "
        "found three levels up; the trainer takes the vocabulary's size and sha256 from it. "
        "Give the shards directory, or keep manifest.json where `bertkit examples` wrote it\n"
    )
    source = shard_source.open_source(pattern)
    assert opened == []  # counted only when a count is asked for
    assert [shard.samples for shard in source.shards] == SHARD_SIZES
    assert opened == [f"{shards_dir}/seq128/train/shard-{n:06d}.tar" for n in range(5)]
    assert source.samples == sum(SHARD_SIZES) and len(opened) == 5  # counted once


def test_the_trainers_unverified_read_of_a_local_shard_is_bounded_by_its_size(
    tmp_path: Path,
) -> None:
    """A local shard named without a manifest: the trainer's reader knows the file's size,
    so a member claiming more is refused with the bytes the file really has left."""
    from pipelines.io.retry import RetryPolicy
    from trainer.data import Segment, read_samples
    from trainer.source import ShardEntry

    shard = tmp_path / "shard-000000.tar"
    shard.write_bytes(_huge_member_shard())
    segments = [Segment(ShardEntry(str(shard), 1), 0, 1)]
    with pytest.raises(ShardReadError, match="more than the 1,024 bytes left in it after"):
        next(read_samples(segments, RetryPolicy()))


def test_a_presigned_shard_url_is_refused_by_the_trainer_naming_why(tmp_path, capsys):
    from trainer import train

    url = "http://127.0.0.1:9/s/seq128/train/shard-000000.tar?X-Amz-Signature=abc"
    assert (
        train.run(
            [
                "--shards",
                url,
                "--output",
                str(tmp_path / "run"),
                "--max-steps",
                "1",
                "--warmup-steps",
                "0",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        "bertkit train: error: http://127.0.0.1:9/s/seq128/train/shard-000000.tar?"
        "X-Amz-Signature=***: a shard URL with a query (presigned) is read without a manifest, "
        "and the trainer takes the vocabulary's size and sha256 from one. Give the shards "
        "directory on s3://, gs:// or http(s):// instead"
    )
    assert not (tmp_path / "run").exists()
