"""What a mix's loader holds between micro-batches (trainer/data.py, trainer/mix.py): the
windows of its sources' orders keep their samples as plain (key, bytes, shard) tuples, which
the garbage collector stops tracking, so a full collection does not go over a window's
thousands of samples while the mix draws on it."""

from __future__ import annotations

import gc
import itertools

from tests.test_data import write_uneven_shards
from trainer.data import LoaderConfig, RawSample, mix_reading, mixed_train_stream, open_source
from trainer.mix import MixedSource


def test_a_mix_holds_its_windows_samples_untracked_and_hands_out_raw_samples(tmp_path):
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
    held = [sample for window, _ in reading[1]._held.values() for sample in window.tolist()]
    # The worker's unit is the whole nominal epoch (14 global batches): a draws about 235,
    # within its epoch 0's 240 (windows of 96, 96, 48), b about 101 of its 72 a pass: epoch
    # 0's window and epoch 1's (72 each, 3 global batches).
    assert len(held) == 240 + 72 + 72
    assert {type(sample) for sample in held} == {tuple}
    assert not any(gc.is_tracked(sample) for sample in held)
    key, data, shard = held[0]
    assert RawSample(key, data, shard).data is data
