"""What the training loader holds between micro-batches (trainer/samples.py, trainer/data.py,
trainer/mix.py): the samples of a window (a mix's windows of its sources' orders, one source's
window of its order) stay in the bytes of the blocks they were read in, with where each one
lies: no object per sample while held. A micro-batch's (key, bytes, shard) tuples are made
just before it is decoded, untracked by the garbage collector, and decoded as they are."""

from __future__ import annotations

import gc
import itertools
import os

import numpy as np

from pipelines.io.retry import RetryPolicy
from pipelines.io.shards import SampleBlock
from tests.test_data import make_example, write_uneven_shards
from tests.test_mix_loader import SEED, WINDOW, mix  # noqa: F401 (a fixture)
from trainer.data import (
    LoaderConfig,
    StreamReader,
    decode_samples,
    epoch_shards,
    mix_reading,
    mixed_train_stream,
    open_source,
)
from trainer.samples import HeldSamples


def test_a_mix_holds_its_windows_in_their_blocks_bytes(mix):  # noqa: F811
    config = LoaderConfig(3, accumulation=8, shuffle_buffer=WINDOW, seed=SEED)
    reading = mix_reading(mix, config)
    batches = list(itertools.islice(mixed_train_stream(mix, config, 0, 0, 0, 1, reading), 8))
    assert sum(len(batch["input_ids"]) for batch in batches) == 24
    windows = list(reading[1]._held.values())
    # The worker's unit is the whole nominal epoch (14 global batches): a draws about 235,
    # within its epoch 0's 240 (windows of 96, 96, 48), b about 101 of its 72 a pass: epoch
    # 0's window and epoch 1's (72 each, 3 global batches).
    assert [len(window.held) for window in windows] == [96, 96, 48, 72, 72]
    # Each window holds the bytes of the blocks of 4 samples its span meets, one bytes object
    # a block: 24 whole blocks for 96 samples, one more or two where the span starts or ends
    # inside a block, or meets a shard's short last one (b's epoch order: 50 samples, 13
    # blocks the last of 2, then 22 of 40 in 6). Every block held has samples of the window.
    assert [len(window.held.blocks) for window in windows] == [25, 26, 13, 19, 19]
    for window in windows:
        assert np.unique(window.held.owner).tolist() == list(range(len(window.held.blocks)))
        assert {type(block) for block in window.held.blocks} == {bytes}
        assert window.held.keys.dtype == np.int64
    # Its samples, made on demand, are the plain tuples a micro-batch decodes as they are.
    picked = windows[0].held.pick(np.array([0, 1]))
    assert {type(sample) for sample in picked} == {tuple}
    gc.collect()
    assert not any(gc.is_tracked(sample) for sample in picked)
    (sample, _), _ = decode_samples(picked)
    assert sample is picked[0]
    assert sample[1] == make_example(sample[0]).encode(2)


def test_a_window_is_let_go_once_the_mix_has_drawn_past_it(mix):  # noqa: F811
    config = LoaderConfig(3, accumulation=8, shuffle_buffer=WINDOW, seed=SEED)
    _, windows = mix_reading(mix, config)
    _, fresh = mix_reading(mix, config)
    zeros = np.zeros(10, dtype=np.int64)
    first, _ = windows.take(zeros, np.arange(10), np.array([0, 0]))
    # Source a's window of epoch 0 that starts at global batch 0: 96 samples (4 batches).
    (window,) = windows._held.values()
    assert (window.start, window.end, len(window.held)) == (0, 96, 96)
    # Positions 95 and 96 lie in two windows: both are held, the asked order kept.
    second, epochs = windows.take(np.array([0, 0, 1]), np.array([96, 95, 0]), np.array([10, 0]))
    assert [(w.start, w.end) for w in windows._held.values()] == [(0, 96), (96, 192), (0, 72)]
    expected, _ = fresh.take(
        np.array([0] * 12 + [1]), np.array([*range(10), 96, 95, 0]), np.zeros(2)
    )
    got = first.pick(slice(None)) + second.pick(slice(None))
    assert got == expected.pick(slice(None))
    assert epochs.tolist() == [0, 0, 0]
    # A window wholly drawn is dropped: a's first window ends at 96.
    windows.take(np.array([0]), np.array([97]), np.array([96, 0]))
    assert [(w.start, w.end) for w in windows._held.values()] == [(96, 192), (0, 72)]


def test_one_source_reads_only_the_blocks_it_wants_and_makes_samples_on_demand(tmp_path):
    source = open_source(str(write_uneven_shards(tmp_path / "a", [70, 30], 4)))
    shards = epoch_shards(source.shards, 12345, 0, False)  # stored order: key = offset
    reader = StreamReader(shards, RetryPolicy(), True)  # as train_stream opens it
    held = reader.read(np.array([0, 1, 5, 69, 70, 99]))
    # Blocks of 4: shard 0's blocks 0, 1 and 17 (samples 68, 69), shard 1's 0 and 7.
    assert len(held.blocks) == 5
    assert [os.path.basename(shard) for shard in held.shards] == [
        "shard-000000.tar",
        "shard-000000.tar",
        "shard-000000.tar",
        "shard-000001.tar",
        "shard-000001.tar",
    ]
    samples = held.pick(np.arange(len(held)))
    assert [key for key, _, _ in samples] == [0, 1, 5, 69, 70, 99]
    assert [data for _, data, _ in samples] == [
        make_example(key).encode(2) for key in [0, 1, 5, 69, 70, 99]
    ]
    assert [sample for sample, _ in decode_samples(samples)] == samples
    # In any order asked, from the same blocks.
    assert [key for key, _, _ in held.select(np.array([5, 0, 3])).pick(slice(None))] == [
        99,
        0,
        69,
    ]


def test_held_samples_join_in_order_with_their_own_blocks():
    def block(first: int, samples: list[bytes]) -> HeldSamples:
        ends = np.cumsum([len(s) for s in samples])
        starts = ends - [len(s) for s in samples]
        part = SampleBlock(str(first), first, b"".join(samples), starts, ends)
        count = len(samples)
        owner = np.zeros(count, np.int64)
        return HeldSamples(
            [part.data], [f"s{first}"], owner, starts, ends, first + np.arange(count)
        )

    joined = HeldSamples.join([block(0, [b"ab", b"c"]), block(10, [b"d", b"", b"efg"])])
    assert joined.pick(slice(None)) == [
        (0, b"ab", "s0"),
        (1, b"c", "s0"),
        (10, b"d", "s10"),
        (11, b"", "s10"),
        (12, b"efg", "s10"),
    ]
    assert joined.select(np.array([4, 1])).pick(slice(None)) == [
        (12, b"efg", "s10"),
        (1, b"c", "s0"),
    ]


def test_a_read_takes_the_wanted_samples_of_blocks_and_single_sample_members():
    """The samples wanted of what a verified span holds: a block of three (offsets 0-2),
    then two 1.x members of one sample each (offsets 3 and 4), in one list."""
    from trainer.samples import _Holding

    block = SampleBlock("7", 7, b"xxAAbbbC", np.array([2, 4, 7]), np.array([4, 7, 8]))
    members = [
        SampleBlock("12", None, b"dd", None, None),
        SampleBlock("13", None, b"e", None, None),
    ]
    holding = _Holding()
    holding.add([block, *members], "s.tar", 0, np.array([0, 2, 4]))
    holding.add(members, "t.tar", 5, np.array([5, 6]))  # offsets 5 and 6: both members
    assert holding.held().pick(slice(None)) == [
        (7, b"AA", "s.tar"),
        (9, b"C", "s.tar"),
        (13, b"e", "s.tar"),
        (12, b"dd", "t.tar"),
        (13, b"e", "t.tar"),
    ]
