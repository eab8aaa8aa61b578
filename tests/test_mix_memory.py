"""What the training loader holds between micro-batches (trainer/data.py, trainer/mix.py):
the samples of a window (a mix's windows of its sources' orders, one source's window of its
order) are plain (key, bytes, shard) tuples, which the garbage collector stops tracking, so
a full collection does not go over a window's thousands of samples while they are held; and
they are decoded as they are, no object made per sample to carry them."""

from __future__ import annotations

import gc
import itertools
import os

import numpy as np

from pipelines.io.retry import RetryPolicy
from tests.test_data import write_uneven_shards
from trainer.data import (
    LoaderConfig,
    StreamReader,
    decode_samples,
    epoch_shards,
    mix_reading,
    mixed_train_stream,
    open_source,
)
from trainer.mix import MixedSource


def test_a_mix_holds_its_windows_samples_untracked_and_decodes_them_as_they_are(tmp_path):
    sources = tuple(
        open_source(str(write_uneven_shards(tmp_path / name, sizes, 4)))
        for name, sizes in (("a", [70, 30, 110, 50]), ("b", [40, 50]))
    )
    mix = MixedSource(sources, ("a", "b"), (0.7, 0.3))
    config = LoaderConfig(3, accumulation=8, shuffle_buffer=96, seed=12345)
    reading = mix_reading(mix, config)
    batches = list(itertools.islice(mixed_train_stream(mix, config, 0, 0, 0, 1, reading), 8))
    assert sum(len(batch["input_ids"]) for batch in batches) == 24
    gc.collect()
    held = [sample for window in reading[1]._held.values() for sample in window.samples]
    # The worker's unit is the whole nominal epoch (14 global batches): a draws about 235,
    # within its epoch 0's 240 (windows of 96, 96, 48), b about 101 of its 72 a pass: epoch
    # 0's window and epoch 1's (72 each, 3 global batches).
    assert len(held) == 240 + 72 + 72
    assert {type(sample) for sample in held} == {tuple}
    assert not any(gc.is_tracked(sample) for sample in held)
    (sample, header), _ = decode_samples(held[:2])
    assert sample is held[0]  # the held tuple itself: nothing made per sample to decode it
    assert (sample[0], header.n_tokens) == (211, 9)


def test_a_window_lets_go_of_the_samples_the_mix_has_drawn(tmp_path):
    sources = tuple(
        open_source(str(write_uneven_shards(tmp_path / name, sizes, 4)))
        for name, sizes in (("a", [70, 30, 110, 50]), ("b", [40, 50]))
    )
    mix = MixedSource(sources, ("a", "b"), (0.7, 0.3))
    config = LoaderConfig(3, accumulation=8, shuffle_buffer=96, seed=12345)
    _, windows = mix_reading(mix, config)
    _, fresh = mix_reading(mix, config)
    zeros = np.zeros(10, dtype=np.int64)
    first, _ = windows.take(zeros, np.arange(10), np.array([0, 0]))
    # Source a's window of epoch 0 that starts at global batch 0: 96 samples (4 batches).
    (window,) = windows._held.values()
    assert (window.start, window.end, window.cleared) == (0, 96, 0)
    # The next unit starts at a's position 10 and b's 0: a's first 10 are let go.
    second, epochs = windows.take(np.array([0, 0, 1]), np.array([10, 95, 0]), np.array([10, 0]))
    assert window.cleared == 10
    assert window.samples[:10] == [None] * 10
    assert None not in window.samples[10:]
    expected, _ = fresh.take(
        np.array([0] * 12 + [1]), np.array([*range(10), 10, 95, 0]), np.zeros(2)
    )
    assert [sample[0] for sample in first + second] == [sample[0] for sample in expected]
    assert epochs.tolist() == [0, 0, 0]
    # A window wholly drawn is dropped: a's first window ends at 96.
    windows.take(np.array([0]), np.array([96]), np.array([96, 0]))
    assert [(w.start, w.end) for w in windows._held.values()] == [(0, 72), (96, 192)]


def test_one_source_reads_its_windows_samples_as_untracked_plain_tuples(tmp_path):
    source = open_source(str(write_uneven_shards(tmp_path / "a", [70, 30], 4)))
    shards = epoch_shards(source.shards, 12345, 0, False)  # stored order: key = offset
    reader = StreamReader(shards, RetryPolicy(), True)  # as train_stream opens it
    held = reader.read(np.array([0, 1, 5, 69, 70, 99]))
    gc.collect()
    assert [(key, os.path.basename(shard)) for key, _, shard in held] == [
        (0, "shard-000000.tar"),
        (1, "shard-000000.tar"),
        (5, "shard-000000.tar"),
        (69, "shard-000000.tar"),
        (70, "shard-000001.tar"),
        (99, "shard-000001.tar"),
    ]
    assert {type(sample) for sample in held} == {tuple}
    assert not any(gc.is_tracked(sample) for sample in held)
    assert [sample for sample, _ in decode_samples(held)] == held
