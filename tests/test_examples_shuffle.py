"""The example stage's regroupings in one level or two (pipelines/examples/shuffle.py): the
choice, the files each writes, the regroup step on literal records, and the real sample's
shards byte-identical either way."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipelines import examples
from pipelines.beam.files import read_file
from pipelines.beam.spill import pack_example, unpack_examples
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.keys import BucketKey, PartitionKey
from pipelines.examples.plan import plan_layout, plan_routes
from pipelines.examples.shuffle import (
    ROUTES_DIR,
    RegroupFn,
    RoutedSpillWriter,
    Routing,
    SpillSizes,
    iter_routed,
    level_files,
    plan_routing,
    spill_files,
    two_level_routing,
)

MB = 1 << 20


def bucket_keys(n: int) -> list[BucketKey]:
    return [BucketKey("seq128/train", b) for b in range(n)]


def sizes(mappers: int, mapper_mb: float, key_mb: float) -> SpillSizes:
    return SpillSizes(mappers, mapper_mb * MB, key_mb * MB, 32 * MB, 256 * MB)


def test_two_levels_where_they_write_at_least_four_times_fewer_files() -> None:
    # 100 keys from 50 mappers of 64 MB each: on one level a mapper's 32 MB budget is full
    # twice over 100 buffers, so it writes 64 × 100 / 32 = 200 files: 10,000 in all. On two,
    # with 256 MB budgets, the fewest files come from 5 route groups of 20 keys: 50 × 5
    # first-level files; a group's 20 × 32 MB = 640 MB is regrouped in 640 ÷ 256 → 2 chunks
    # (steps) of 320 MB, each through 20 buffers: 320 × 20 / 256 = 25 files a step, 250.
    routing = plan_routing(bucket_keys(100), sizes(50, 64, 32))
    assert (routing.group_size, routing.groups, routing.chunks) == (20, 5, 2)
    assert (routing.steps, routing.budget_bytes) == (10, 256 * MB)
    assert level_files(routing, sizes(50, 64, 32)) == (250, 250)
    assert spill_files(Routing(routing.keys), sizes(50, 64, 32)) == 10_000
    # Route groups of √100 = 10 keys, one step each (640 ÷ 256 → 1 chunk would hold 320 MB:
    # 10 × 32 MB = 320 MB through 10 buffers, 13 files a group): 500 + 130 = 630 files.
    assert level_files(Routing(routing.keys, 10, 256 * MB), sizes(50, 64, 32)) == (500, 130)
    # 9 keys from 4 small mappers: 36 files on one level, 4 × 2 + 2 × … = 18 on two: one
    # level, since 36 is under 10,000.
    assert spill_files(Routing(tuple(bucket_keys(9))), sizes(4, 1, 1)) == 36
    assert spill_files(two_level_routing(bucket_keys(9), sizes(4, 1, 1)), sizes(4, 1, 1)) == 18
    assert not plan_routing(bucket_keys(9), sizes(4, 1, 1)).two_level
    # Fewer than 4 keys: one level, unless forced; forced to one level on a large run.
    assert not plan_routing(bucket_keys(3), sizes(1_000, 64, 64)).two_level
    forced = plan_routing(bucket_keys(3), sizes(1, 1, 1), "2")
    assert (forced.group_size, forced.groups, forced.chunks) == (2, 2, 1)  # at least 2 groups
    assert not plan_routing(bucket_keys(100), sizes(50, 64, 32), "1").two_level


def test_a_full_english_wikipedia_run_writes_over_300_times_fewer_spill_files() -> None:
    # An English Wikipedia-sized run at 128 tokens, dupe 10: 48,552 MB of documents text in
    # 1,500 files; 331 pairing partitions a pass (3,310 pairing steps) and 4,846 buckets.
    inputs = [
        SimpleNamespace(
            manifest=SimpleNamespace(
                counts={"documents": 6_900_000, "text_bytes": 48_552 * MB}, files=[None] * 1_500
            )
        )
    ]
    config = ExamplesConfig(documents=(), vocab="", output="/o", max_seq_lengths=(128,))
    layout = plan_layout(config, inputs, 30_522)
    routes = plan_routes(config, layout, inputs)
    partitions, buckets = routes.partitions, routes.buckets
    assert (len(partitions.keys), partitions.group_size, partitions.chunks) == (3_310, 158, 9)
    assert (len(buckets.keys), buckets.group_size, buckets.chunks) == (4_846, 231, 14)
    # 21 route groups each: 189 and 294 regroup steps of 1 to 2 GB (--regroup-budget-mb 1024).
    assert (partitions.groups, partitions.steps, buckets.groups, buckets.steps) == (
        21,
        189,
        21,
        294,
    )
    # One level: each documents file writes ~14,600 files (148 MB of token ids over 3,310
    # buffers in 32 MB) and each pairing step ~14,200: 68.8 M files of ~10 kB. Two levels:
    # 1,500 × 21 + 189 steps × 173 (158 keys' 1.2 GB through 158 buffers in 1 GB), then
    # 3,310 × 21 + 294 × 239: 0.20 M files of ~2 to 5 MB.
    assert routes.level_files() == {"partitions": (31_500, 32_697), "buckets": (69_510, 70_266)}
    assert routes.spill_files() == (203_973, 68_791_160)


def test_routed_records_reach_their_keys_through_the_regroup_step(tmp_path) -> None:
    keys = tuple(PartitionKey("train", 0, q) for q in range(5))
    routing = Routing(keys, 2, 1 << 20)  # route groups {q0, q1}, {q2, q3}, {q4}
    work = str(tmp_path / "documents")
    writer = RoutedSpillWriter(work, "d000-f00000", 1 << 20, routing)
    for q, record in [(4, b"d"), (0, b"a"), (3, b"c"), (1, b"b"), (0, b"e")]:
        writer.add(keys[q], record)
    first_level = writer.close()
    assert [(group, Path(path).relative_to(work).as_posix()) for group, path in first_level] == [
        (0, f"{ROUTES_DIR}/r00000/d000-f00000-00000.bin"),
        (1, f"{ROUTES_DIR}/r00001/d000-f00000-00000.bin"),
        (2, f"{ROUTES_DIR}/r00002/d000-f00000-00000.bin"),
    ]
    with open(first_level[0][1], "rb") as stream:
        assert list(iter_routed(stream, "r0")) == [(0, b"a"), (1, b"b"), (0, b"e")]

    regroup = RegroupFn(work, routing)
    regrouped = [
        (key, Path(path).relative_to(work).as_posix(), read_file(path))
        for group, path in first_level
        for key, path in regroup.process((group, [path]))
    ]
    assert regrouped == [
        (("train", 0, 0), "train/p00000/q00000/r00000-00000.bin", b"ae"),
        (("train", 0, 1), "train/p00000/q00001/r00000-00000.bin", b"b"),
        (("train", 0, 3), "train/p00000/q00003/r00001-00000.bin", b"c"),
        (("train", 0, 4), "train/p00000/q00004/r00002-00000.bin", b"d"),
    ]


class Trickle(io.RawIOBase):
    """A stream that returns at most 3 bytes a read, as a network stream may."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._data.read(min(size, 3) if size >= 0 else 3)


def test_routed_records_survive_short_reads_and_a_cut_is_named() -> None:
    data = _ROUTED_RECORDS
    assert list(iter_routed(Trickle(data), "f")) == [(2, b"hello"), (0, b""), (1, b"xy")]
    # The third record starts at byte 13 + 8 = 21; two stray bytes after it, at 21 + 10.
    with pytest.raises(ValueError, match=r"f: truncated routed record at byte 21"):
        list(iter_routed(Trickle(data[:-1]), "f"))
    with pytest.raises(ValueError, match=r"f: truncated routed record at byte 31"):
        list(iter_routed(Trickle(data + b"\x01\x00"), "f"))


# (key 2, "hello"), (key 0, ""), (key 1, "xy"): an 8-byte header each (index, size).
_ROUTED_RECORDS = (
    b"\x02\x00\x00\x00\x05\x00\x00\x00hello"
    b"\x00\x00\x00\x00\x00\x00\x00\x00"
    b"\x01\x00\x00\x00\x02\x00\x00\x00xy"
)


def test_a_record_in_the_wrong_route_group_is_refused(tmp_path) -> None:
    keys = tuple(bucket_keys(4))
    routing = Routing(keys, 2, 1 << 20)
    writer = RoutedSpillWriter(str(tmp_path), "u", 1 << 20, routing)
    writer.add(keys[3], pack_example(7, b"x"))
    ((group, path),) = writer.close()
    assert group == 1
    with pytest.raises(
        ValueError, match=r"a record for key 3 in route group 0, which holds keys 0–1"
    ):
        list(RegroupFn(str(tmp_path), routing).process((0, [path])))
    # In its own group it arrives whole: (place 7, b"x") in bucket 3's file.
    ((key, regrouped),) = RegroupFn(str(tmp_path), routing).process((1, [path]))
    assert key == ("seq128/train", 3)
    assert list(unpack_examples(read_file(regrouped), regrouped)) == [(7, b"x")]


def test_each_mapper_s_files_go_to_one_chunk_of_their_route_group(tmp_path) -> None:
    keys = tuple(bucket_keys(4))
    routing = Routing(keys, 2, 1 << 20, chunks=3)  # route groups {0, 1}, {2, 3}; 6 steps
    assert (routing.groups, routing.steps) == (2, 6)
    # A stable hash of the mapper's unit name picks its chunk: "d" the first, "e" the second.
    assert [routing.step_of(group, unit) for group in (0, 1) for unit in "def"] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]
    spills = []
    for unit, place in (("d", 1), ("e", 2)):
        writer = RoutedSpillWriter(str(tmp_path), unit, 1 << 20, routing)
        writer.add(keys[3], pack_example(place, b"x"))
        writer.add(keys[0], pack_example(place, b"y"))
        spills += writer.close()
    assert [(step, Path(path).name) for step, path in spills] == [
        (0, "d-00000.bin"),
        (3, "d-00000.bin"),
        (1, "e-00000.bin"),
        (4, "e-00000.bin"),
    ]
    # The regroup step names its files by route group and chunk: step 4 is group 1, chunk 1.
    regroup = RegroupFn(str(tmp_path), routing)
    ((key, path),) = regroup.process((4, [spills[3][1]]))
    assert (key, Path(path).relative_to(tmp_path).as_posix()) == (
        ("seq128/train", 3),
        "seq128/train/b00003/r00001c00001-00000.bin",
    )
    assert list(unpack_examples(read_file(path), path)) == [(2, b"x")]


def test_the_sample_makes_the_same_shards_and_manifest_on_one_level_or_two(
    tmp_path, monkeypatch, sample_documents, sample_vocab
) -> None:
    regrouped: list[int] = []
    process = RegroupFn.process

    def counting(self, element):
        regrouped.append(element[0])
        yield from process(self, element)

    monkeypatch.setattr(RegroupFn, "process", counting)
    # Small partitions and buckets, so each regrouping has several keys: 6 pairing steps
    # (train 2 × 2 passes + held-out 1 × 2) and 6 buckets, in route groups of 3.
    flags = [
        "--max-seq-length",
        "128",
        "--dupe-factor",
        "2",
        "--heldout-fraction",
        "0.05",
        "--samples-per-shard",
        "2000",
        "--partner-group-docs",
        "8",
        "--work-partition-mb",
        "1",
        "--bucket-mb",
        "1",
    ]
    outputs = {}
    for levels in ("1", "2"):
        output = tmp_path / f"levels-{levels}"
        argv = ["--documents", *map(str, sample_documents), "--vocab", str(sample_vocab)]
        argv += ["--output", str(output), *flags, "--shuffle-levels", levels]
        assert examples.run(argv) == 0
        outputs[levels] = {
            p.relative_to(output).as_posix(): p.read_bytes()
            for p in sorted(output.rglob("*"))
            if p.is_file()
        }
    assert sorted(regrouped) == [0, 0, 1, 1]  # two route groups in each regrouping
    assert outputs["1"].keys() == outputs["2"].keys()
    assert sum(name.endswith(".tar") for name in outputs["1"]) == 9
    for name, data in outputs["1"].items():
        assert outputs["2"][name] == data, name
