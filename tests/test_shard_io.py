"""The shard writer's tar bytes and the verifying reader, on literal samples."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile

import pytest

from pipelines.beam.shards import write_shard
from pipelines.io.retry import ResumingStream, RetryPolicy, range_opener
from pipelines.io.shards import (
    ShardReadError,
    block_table_file,
    encode_shard,
    iter_tar_samples,
    load_blocks,
    read_verified_samples,
    tar_bytes,
)
from schemas.checks import RecordError
from schemas.examples import unpack_samples
from schemas.shards import (
    BLOCK_SAMPLES,
    BlockTableFile,
    SequenceOutput,
    ShardBlock,
    ShardInfo,
    ShardsManifest,
    SplitShards,
)

SAMPLES = [("000000000000", b"first"), ("000000000001", b"x" * 600)]


def test_tar_is_standard_and_fixed_byte_for_byte():
    data = tar_bytes(SAMPLES)
    # One block member: header + (8 + 2 × 4 + 5 + 600 = 621 bytes padded to 1024) + 2 end blocks.
    assert len(data) == 512 + 1024 + 1024
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = archive.getmembers()
        assert [(m.name, m.size, m.mtime, m.mode, m.uid, m.uname) for m in members] == [
            ("000000000000.examples.bin", 621, 0, 0o444, 0, ""),
        ]
        assert unpack_samples(archive.extractfile(members[0]).read()) == [b"first", b"x" * 600]
    assert tar_bytes(SAMPLES) == data  # no clock, user or host in the bytes


def test_write_shard_is_atomic_and_describes_itself(tmp_path):
    info = write_shard(str(tmp_path), "shard-000000.tar", SAMPLES)
    data = (tmp_path / "shard-000000.tar").read_bytes()
    assert (info.samples, info.bytes, info.sha256, info.first_key) == (
        2,
        len(data),
        hashlib.sha256(data).hexdigest(),
        "000000000000",
    )
    # The blocks are in the block table beside the shard; the entry records its bytes.
    table = (tmp_path / "shard-000000.tar.blocks.json").read_bytes()
    assert info.blocks == () and info.block_samples == BLOCK_SAMPLES
    assert info.block_table == BlockTableFile(len(table), hashlib.sha256(table).hexdigest())
    assert table == (
        b'{"block_samples":512,"offsets":[0],"sha256":["%s"]}\n'
        % hashlib.sha256(data).hexdigest().encode()
    )  # one block: the whole shard
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # no temporary left
        "shard-000000.tar",
        "shard-000000.tar.blocks.json",
    ]


@pytest.mark.parametrize("cut", [1024, 1536, 2048, 2100])
def test_a_shard_cut_anywhere_is_an_error_naming_it(cut):
    data = tar_bytes(SAMPLES)[:cut]  # mid-data, after the member, after one end block
    with pytest.raises(ShardReadError, match=r"shard-000007\.tar: .*truncated"):
        list(iter_tar_samples(io.BytesIO(data), "shard-000007.tar"))


def test_a_changed_byte_fails_the_manifest_check(tmp_path):
    info = write_shard(str(tmp_path), "s.tar", SAMPLES)
    data = bytearray((tmp_path / "s.tar").read_bytes())
    data[1200] ^= 1  # in the member's padding: tar still reads, the sha256 does not match
    table = _Ranges((tmp_path / "s.tar.blocks.json").read_bytes())
    with pytest.raises(ShardReadError, match="do not match the manifest's sha256"):
        list(read_verified_samples(_Ranges(bytes(data)), "s.tar", info, open_table=table))
    good = read_verified_samples(_Ranges(tar_bytes(SAMPLES)), "s.tar", info, open_table=table)
    assert list(good) == SAMPLES


@pytest.mark.parametrize("chunk", [1, 511, 512, 700, 1 << 20])
def test_reader_takes_any_read_size(chunk):
    # Reads that end inside a header, a payload or its padding give the same samples.
    samples = [(f"{i:012d}", bytes([i]) * (i * 97)) for i in range(12)]
    data, _ = encode_shard("s.tar", samples, block_samples=5)  # members of 5, 5 and 2
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
    with pytest.raises(
        ShardReadError, match=r"p\.tar: member '000000000001\.txt' is not a bertkit"
    ):
        next(stream)


@pytest.mark.parametrize(
    ("pax_headers", "member", "message"),
    [
        (
            {"path": "../../elsewhere.example.bin"},
            "000000000000.example.bin",
            r"pax header '\./\./@PaxHeader' sets path for the member after it, which bertkit "
            r"reads by its own header: not a bertkit shard",
        ),
        (
            {"size": "1000000000000000000000000000000", "comment": "é"},
            "000000000000.example.bin",
            r"sets size for the member after it",
        ),
        (
            {"GNU.sparse.name": "../../elsewhere.example.bin"},
            "000000000000.example.bin",
            r"sets GNU\.sparse\.name for the member after it",
        ),
        (
            {},
            "/abs/000000000000.examples.bin",
            r"member '/abs/000000000000\.examples\.bin' is not a bertkit block of samples "
            r"\(its key is not a sample number\)",
        ),
    ],
)
def test_reader_refuses_a_member_another_tool_would_read_otherwise(pax_headers, member, message):
    """A pax `path` or `size` was skipped: tarfile and webdataset would have read another
    member there. A key that is not a number was an int() error."""
    pax = io.BytesIO()
    with tarfile.open(fileobj=pax, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo(member)
        info.size, info.pax_headers = 3, pax_headers
        if "size" in pax_headers:  # tarfile writes the real size; the header lies after
            info.pax_headers = {"comment": "é"}
        archive.addfile(info, io.BytesIO(b"abc"))
    data = pax.getvalue()
    if "size" in pax_headers:
        data = data.replace(b"comment=\xc3\xa9", b"size=10000000000000000000000000000000")
    with pytest.raises(ShardReadError, match=message):
        list(iter_tar_samples(io.BytesIO(data), "p.tar"))


def test_reader_refuses_a_damaged_header():
    data = bytearray(encode_shard("d.tar", SAMPLES, block_samples=1)[0])  # a member each
    data[1024 + 10] ^= 0xFF  # the second member's name: its header checksum no longer adds up
    stream = iter_tar_samples(io.BytesIO(bytes(data)), "d.tar")
    assert next(stream) == SAMPLES[0]
    with pytest.raises(
        ShardReadError, match=r"d\.tar: bad tar header checksum after sample 000000000000"
    ):
        next(stream)


# --------------------------------------------------------------------------- verified blocks

# sample i's data is 100 + 500·i bytes: 1, 2, 3, 4 and 5 tar blocks of 512
FIVE = [(f"{i:012d}", bytes([65 + i]) * (100 + 500 * i)) for i in range(5)]


def _blocked(samples=FIVE, block_samples=2):
    data, info = encode_shard("seq128/train/shard-000000.tar", samples, block_samples)
    return data, info


class _Ranges:
    """An opener over literal bytes that records each byte range asked for."""

    def __init__(self, data: bytes) -> None:
        self.data, self.asked = data, []

    def __call__(self, start: int, end: int) -> io.BytesIO:
        self.asked.append((start, end))
        return io.BytesIO(self.data[start:end])


def test_blocks_tile_the_shard_with_a_sha256_each():
    data, info = _blocked()
    # block members (header + 8 + 4 per sample + data, padded): 3 | 7 | 6 tar blocks of 512,
    # then 2 end-of-archive blocks
    assert [block.offset for block in info.blocks] == [0, 1536, 5120]
    assert info.block_samples == 2 and info.bytes == len(data) == 9216
    ends = [1536, 5120, 9216]
    assert [b.sha256 for b in info.blocks] == [
        hashlib.sha256(data[b.offset : end]).hexdigest()
        for b, end in zip(info.blocks, ends, strict=True)
    ]
    assert [(s.first, s.stop, s.start, s.end) for s in info.spans()] == [
        (0, 2, 0, 1536),
        (2, 4, 1536, 5120),
        (4, 5, 5120, 9216),
    ]
    assert tar_bytes(FIVE) == encode_shard("x.tar", FIVE, BLOCK_SAMPLES)[0]  # one member
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:  # plain tar, a member per block
        assert archive.getnames() == [
            f"{k}.examples.bin" for k in ("0" * 12, "0" * 11 + "2", "0" * 11 + "4")
        ]


@pytest.mark.parametrize(
    ("skip", "take", "ranges"),
    [
        (0, None, [(0, 9216)]),
        (2, 1, [(1536, 5120)]),  # one sample in the middle: its block only
        (3, 2, [(1536, 9216)]),
        (4, 1, [(5120, 9216)]),
        (1, 2, [(0, 5120)]),
    ],
)
def test_a_range_of_samples_reads_only_its_blocks(skip, take, ranges):
    data, info = _blocked()
    opener = _Ranges(data)
    stop = 5 if take is None else skip + take
    assert list(read_verified_samples(opener, "s.tar", info, skip, take)) == FIVE[skip:stop]
    assert opener.asked == ranges


def test_a_changed_block_releases_none_of_its_samples():
    data, info = _blocked()
    changed = bytearray(data)
    changed[1536 + 512 + 100] ^= 1  # sample 2's data: tar still parses
    read = []
    with pytest.raises(ShardReadError) as error:
        for sample in read_verified_samples(_Ranges(bytes(changed)), "s.tar", info):
            read.append(sample)
    assert read == FIVE[:2]  # block 0 verified and used; nothing of block 1
    assert str(error.value).startswith(
        "s.tar: samples 2–3 (bytes 1,536–5,120) do not match the manifest's sha256 ("
    )
    assert str(error.value).endswith(
        "none of them was used. The shard was changed or damaged after writing: rebuild it "
        "or restore it from the source"
    )


def test_a_cut_shard_and_a_block_with_a_sample_too_few_are_errors():
    data, info = _blocked()
    with pytest.raises(
        ShardReadError,
        match=r"s\.tar: ends inside samples 4–4 \(bytes "
        r"5,120–9,216\), after 8,192 bytes; the shard is truncated",
    ):
        list(read_verified_samples(_Ranges(data[:-1024]), "s.tar", info, 4))
    # A manifest that claims 3 samples per block over a shard cut in blocks of 2: the sha256s
    # match, the counts do not.
    lying = ShardInfo(**{**_asdict(info), "block_samples": 3, "samples": 6})
    with pytest.raises(
        ShardReadError,
        match=r"samples 0–2 \(bytes 0–1,536\) hold 2 samples, "
        r"the manifest says 3",
    ):
        list(read_verified_samples(_Ranges(data), "s.tar", lying))


def _asdict(info: ShardInfo) -> dict:
    return {name: getattr(info, name) for name in ShardInfo.__slots__}


def test_an_entry_without_blocks_is_verified_whole_before_use():
    data, info = _blocked()
    whole = ShardInfo(info.path, info.samples, info.bytes, info.sha256, info.first_key)
    opener = _Ranges(data)
    assert list(read_verified_samples(opener, "s.tar", whole, 3, 1)) == FIVE[3:4]
    assert opener.asked == [(0, 9216)]
    changed = bytearray(data)
    changed[-1] = 1  # the end-of-archive bytes: every sample is still readable
    with pytest.raises(ShardReadError, match=r"samples 0–4 \(bytes 0–9,216\) do not match"):
        next(read_verified_samples(_Ranges(bytes(changed)), "s.tar", whole))


# --------------------------------------------------------------------------- block tables (2.1)

FIVE_SHA256 = [  # the blocks of `_blocked()`: bytes 0–1,536, 1,536–5,120, 5,120–9,216
    "f6b98322759920c9f007951ad6d47708c00517bc9fd3330aee040602894bb523",
    "ab0411894e0ff17f672eeabd9a7d1f0259470467bdede51627b621e3c562da06",
    "5a76d902e2e98b4f5ed1bf6a7f11a102a5db2779645da7757821ff28ca4a4ef8",
]


def test_a_block_table_round_trips_and_the_manifest_records_only_its_sha256():
    data, inline = _blocked()
    table, entry = block_table_file(inline)
    assert [block.sha256 for block in inline.blocks] == FIVE_SHA256
    assert table == (
        b'{"block_samples":2,"offsets":[0,1536,5120],"sha256":["%s","%s","%s"]}\n'
        % tuple(digest.encode() for digest in FIVE_SHA256)
    )
    assert len(table) == 256  # ~76 bytes a block, against ~170 inline in the manifest
    assert entry.blocks == () and entry.block_samples == 2
    assert entry.block_table == BlockTableFile(256, hashlib.sha256(table).hexdigest())
    # Read back: the table is fetched once, whole (its recorded bytes, no more), and only the
    # blocks the samples need are read from the shard.
    shard, tables = _Ranges(data), _Ranges(table)
    assert list(read_verified_samples(shard, "s.tar", entry, 2, 1, tables)) == FIVE[2:3]
    assert (tables.asked, shard.asked) == ([(0, 256)], [(1536, 5120)])
    assert load_blocks(_Ranges(table), "s.tar", entry).blocks == inline.blocks
    # Nothing to read, nothing fetched.
    assert list(read_verified_samples(shard, "s.tar", entry, 5, 3, tables)) == []
    assert len(tables.asked) == 1
    # Through the manifest's JSON, the entry keeps the file's record and no `blocks`.
    manifest = _manifest_of([entry])
    raw = json.loads(manifest.to_json())["outputs"]["seq128"]["splits"]["train"]["shards"][0]
    assert sorted(raw) == [
        "block_samples",
        "block_table",
        "bytes",
        "first_key",
        "path",
        "samples",
        "sha256",
    ]
    assert ShardsManifest.from_json(manifest.to_json()).all_shards() == [entry]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.replace(b"1536", b"1537"), r"does not match the manifest's sha256"),
        (lambda t: t[:-1], r"ends after 255 bytes, the manifest records 256"),
        (lambda t: b"", r"ends after 0 bytes, the manifest records 256"),
    ],
)
def test_a_changed_block_table_is_refused_naming_the_shard(change, message):
    data, inline = _blocked()
    table, entry = block_table_file(inline)
    shard = _Ranges(data)
    name = "s3://b/shards/seq128/train/shard-000000.tar"
    with pytest.raises(ShardReadError) as error:
        next(read_verified_samples(shard, name, entry, open_table=_Ranges(change(table))))
    assert str(error.value).startswith(f"{name}: its block table shard-000000.tar.blocks.json ")
    assert re.search(message, str(error.value))
    assert shard.asked == []  # not a byte of the shard read, no sample used


def test_a_missing_block_table_names_the_shard_and_the_fix(tmp_path):
    info = write_shard(str(tmp_path), "shard-000000.tar", SAMPLES)
    (tmp_path / "shard-000000.tar.blocks.json").unlink()
    url = str(tmp_path / "shard-000000.tar")
    opener = range_opener(url, RetryPolicy())
    tables = range_opener(url + ".blocks.json", RetryPolicy())
    with pytest.raises(
        ShardReadError,
        match=r"shard-000000\.tar: its block table "
        r"shard-000000\.tar\.blocks\.json is missing, so none of the shard's",
    ):
        list(read_verified_samples(opener, url, info, open_table=tables))


def test_a_block_table_that_does_not_fit_its_entry_is_refused():
    """A table whose sha256 the manifest records but whose blocks do not tile the shard as
    the entry says (a writer's bug, or a manifest edited to match): refused, field named."""
    _, inline = _blocked()
    table, entry = block_table_file(inline)
    cases = [
        (
            ShardInfo(**{**_asdict(entry), "block_samples": 3}),
            r"s\.tar: its block table s\.tar\.blocks\.json\.block_samples is 2, the manifest says 3",
        ),
        (
            ShardInfo(**{**_asdict(entry), "samples": 7}),
            r"\.blocks\.json\.blocks: 3 blocks, 7 samples in blocks of 2 make 4",
        ),
    ]
    for wrong, message in cases:
        with pytest.raises(ShardReadError, match=message):
            load_blocks(_Ranges(table), "s.tar", wrong)
    for bad in (b"[]", b"{}", b'{"block_samples":2,"offsets":[],"sha256":[]}', b"\xff"):
        with pytest.raises(RecordError):
            entry.with_blocks(bad, "t")


def test_a_2_0_manifest_with_inline_blocks_is_still_read():
    data, inline = _blocked()
    manifest = _manifest_of([inline])
    manifest.schema_version = "2.0"
    text = manifest.to_json()
    assert '"blocks": [' in text and "block_table" not in text  # as 2.0 wrote it
    (read,) = ShardsManifest.from_json(text).all_shards()
    assert read == inline and read.block_table is None
    opener = _Ranges(data)
    assert list(read_verified_samples(opener, "s.tar", read, 3, 2)) == FIVE[3:5]  # no table
    assert opener.asked == [(1536, 9216)]
    # An entry may not list its blocks both ways.
    both = json.loads(text)
    entry = both["outputs"]["seq128"]["splits"]["train"]["shards"][0]
    entry["block_table"] = {"bytes": 256, "sha256": "ab" * 32}
    with pytest.raises(RecordError, match=r"shards\[0\]: lists blocks inline and a block_table"):
        ShardsManifest.from_json(json.dumps(both))


def _manifest_of(shards: list[ShardInfo], samples: int | None = None) -> ShardsManifest:
    total = sum(info.samples for info in shards) if samples is None else samples
    return ShardsManifest(
        vocab={},
        inputs=[],
        config={},
        layout={},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={
            "seq128": SequenceOutput(
                128,
                20,
                {
                    "train": SplitShards(
                        samples=total, not_next=0, tokens=0, predictions=0, shards=shards
                    )
                },
            )
        },
    )


def test_the_manifest_stays_o_shards_at_corpus_scale():
    """20,000 shards of 100 blocks (51,200 samples at 128 tokens, ~18 MB each): 1.02 billion
    samples, 2 M blocks, about a full enwiki + books run at dupe 10. Inline, the blocks alone
    took ~170 bytes each, 340 MB, past the 256 MiB every reader allows; with block tables the
    manifest is ~490 bytes a shard whatever its blocks, and parses in well under a second."""
    shards = [
        ShardInfo(
            path=f"seq128/train/shard-{number:06d}.tar",
            samples=51_200,
            bytes=18_124_800,
            sha256=hashlib.sha256(b"shard %d" % number).hexdigest(),
            first_key=f"{number * 51_200:012d}",
            block_samples=512,
            block_table=BlockTableFile(7_578, hashlib.sha256(b"table %d" % number).hexdigest()),
        )
        for number in range(20_000)
    ]
    text = _manifest_of(shards).to_json()
    assert len(text.encode()) == 9_820_584  # 491 bytes a shard
    assert len(text.encode()) / 20 < 500_000  # per 1,000 shards: well under 1 MB
    assert ShardsManifest.from_json(text).all_shards() == shards
    # The table of one such shard: 100 offsets and sha256s, ~7.6 kB, read when first needed.
    blocks = tuple(ShardBlock(181_248 * i, "ab" * 32) for i in range(100))
    table, _ = block_table_file(
        ShardInfo(**{**_asdict(shards[0]), "blocks": blocks, "block_table": None})
    )
    assert len(table) == 7_578


def test_a_resuming_stream_reads_its_range_and_never_past_it(tmp_path):
    path = tmp_path / "s.tar"
    path.write_bytes(bytes(range(256)) * 4)
    with ResumingStream(str(path), 300, RetryPolicy(), start=10) as stream:
        assert stream.read() == (bytes(range(256)) * 2)[10:300]
        assert stream.read(5) == b""
    with ResumingStream(str(path), 2000, RetryPolicy(attempts=1), start=1000) as stream:
        assert stream.read(24) == (bytes(range(256)) * 4)[1000:1024]
        with pytest.raises(
            ShardReadError,
            match=r"s\.tar: ends after 1,024 bytes, the manifest "
            r"records at least 2,000; the file is truncated",
        ):
            stream.read(1)
