"""A mix read from real shards (trainer/data.py's PretrainingLoader over a MixedSource): each
source's samples in its one-source order, epoch after epoch; the same global batches for any
world size and worker count; a resume goes on with the uninterrupted run's batches; the shares
over 20,000 samples; sources in BERTKIT_RECORD_KEYS; dynamic masks per source."""

from __future__ import annotations

import functools
import itertools
import json
import re

import numpy as np
import pytest

from schemas.batch import BatchField
from tests.support.global_batches import read_global_batches, source_keys
from tests.test_data import write_uneven_shards
from tests.test_dynamic_masking import by_sample, masking_of, static_example, vocab  # noqa: F401
from trainer.collate import SAMPLE_SOURCE, SOURCE_KEY_SHIFT, collate
from trainer.data import (
    RECORD_KEYS_ENV,
    DataConfigError,
    DataPosition,
    LoaderConfig,
    PretrainingLoader,
    RawSample,
    decode_samples,
    open_source,
)
from trainer.mix import MixedSource, MixOrder

# Source a: 260 samples (usable 240 at G = 24: 10 global batches of its own), source b: 90
# (usable 72). At 0.7/0.3 a global batch takes 16 or 17 of a, 7 or 8 of b: b runs out after
# about 10 global batches, a after about 14; the mix's nominal epoch is 350 // 24 = 14.
SIZES = {"a": [70, 30, 110, 50], "b": [40, 50]}
GLOBAL = 24
WINDOW = 96  # windows of 4 global batches in each source's order
SEED = 12345


@pytest.fixture(scope="module")
def mix(tmp_path_factory) -> MixedSource:
    sources = []
    for name, sizes in SIZES.items():
        root = tmp_path_factory.mktemp(f"mix-{name}")
        sources.append(open_source(str(write_uneven_shards(root, sizes, 4))))
    return MixedSource(tuple(sources), tuple(SIZES), (0.7, 0.3))


# `count` global batches (a nominal epoch's 14 unless given) from `start` on, across epochs, as
# (source, key) pairs.
read_mixed = functools.partial(
    read_global_batches,
    count=14,
    global_batch=GLOBAL,
    window=WINDOW,
    keys=source_keys,
    seed=SEED,
)


def one_source_stream(source, batches: int) -> list[int]:
    """The keys of `batches` global batches of a one-source run at the same seed and G, in
    position order, epoch after epoch."""
    return [key for batch in read_mixed(source, 1, count=batches) for _, key in batch]


def test_each_source_is_read_in_its_one_source_order_epoch_after_epoch(mix):
    """Slot j of mixed global batch b holds source s_j's sample at position C_s(b) + rank_j
    of that source's stream: what a one-source run at the same seed and G puts there, into
    the source's next epochs (b's 72 usable samples run out in the first nominal epoch)."""
    batches = read_mixed(mix, 2, count=28)  # two nominal epochs
    order = MixOrder.of(mix, GLOBAL, SEED)
    drawn = order.drawn(28)
    assert drawn.tolist()[1] > 2 * 72 and drawn.tolist()[0] > 240  # both wrapped
    streams = [one_source_stream(part, 24 if n == 0 else 9) for n, part in enumerate(mix.sources)]
    for batch, got in enumerate(batches):
        counts = order.counts(batch, 1)[0]
        sources, ranks = order.slot_sources(batch, counts)
        positions = order.drawn(batch)[sources] + ranks
        expected = [
            (s, streams[s][p]) for s, p in zip(sources.tolist(), positions.tolist(), strict=True)
        ]
        assert got == expected, batch
    # Source b's second pass is its epoch 1's order, not a replay of its first.
    assert streams[1][:72] != streams[1][72:144]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers", [0, 2])
def test_every_world_and_worker_count_reads_the_same_mixed_batches(mix, workers):
    expected = read_mixed(mix, 1)
    assert all(len(batch) == GLOBAL for batch in expected)
    assert all(len(set(batch)) == GLOBAL for batch in expected)  # no sample twice in a batch
    for world in (1, 2, 4):
        assert read_mixed(mix, world, workers) == expected, world
    assert read_mixed(mix, 2, workers, micro=6) == expected  # nor the micro-batch


def test_a_resume_goes_on_with_the_uninterrupted_batches(mix):
    """Stopped after 9 global batches on 2 processes, resumed on 1 and on 4 with workers,
    into the next nominal epoch; and resumed in that epoch."""
    whole = read_mixed(mix, 2, count=20)
    config = LoaderConfig(3, world_size=2, shuffle_buffer=WINDOW, accumulation=4, seed=SEED)
    loader = PretrainingLoader(mix, config)
    assert (loader.global_batches_per_epoch, loader.batches_per_epoch) == (14, 56)
    batches = loader.batches(DataPosition())
    for _ in range(9 * 4):
        next(batches)
    assert loader.position == DataPosition(0, 9)
    for world, workers in ((1, 0), (4, 2)):
        after = read_mixed(mix, world, workers, start=loader.position, count=11)
        assert whole[:9] + after == whole, (world, workers)
    assert read_mixed(mix, 1, start=DataPosition(1, 2), count=4) == whole[16:20]


def test_the_shares_over_20000_samples_and_every_batch_within_its_rounding(mix):
    """834 global batches of 24 (20,016 samples, 60 nominal epochs): 0.7·24 = 16.8 of a and
    7.2 of b a batch, so 16 or 17 and 7 or 8; over the whole, each share within a point."""
    config = LoaderConfig(24, shuffle_buffer=WINDOW, seed=SEED)
    per_batch = []
    with PretrainingLoader(mix, config) as loader:
        for batch in itertools.islice(loader.batches(DataPosition()), 834):
            per_batch.append(np.bincount(batch[SAMPLE_SOURCE].numpy(), minlength=2).tolist())
    counts = np.array(per_batch)
    assert set(counts[:, 0].tolist()) == {16, 17} and set(counts[:, 1].tolist()) == {7, 8}
    shares = counts.sum(axis=0) / counts.sum()
    assert abs(shares[0] - 0.7) <= 0.01 and abs(shares[1] - 0.3) <= 0.01
    assert counts.sum(axis=0).tolist() == MixOrder.of(mix, GLOBAL, SEED).drawn(834).tolist()


def test_the_record_of_keys_names_each_keys_source(mix, tmp_path, monkeypatch):
    monkeypatch.setenv(RECORD_KEYS_ENV, str(tmp_path))
    config = LoaderConfig(6, world_size=2, rank=1, accumulation=2, shuffle_buffer=WINDOW)
    with PretrainingLoader(mix, config) as loader:
        batches = list(itertools.islice(loader.batches(DataPosition()), 3))
    lines = [json.loads(line) for line in (tmp_path / "keys-rank-00001.jsonl").open()]
    assert [(line["global_batch"], line["step"], line["rank"]) for line in lines] == [
        (0, 0, 1),
        (0, 1, 1),
        (1, 0, 1),
    ]
    for line, batch in zip(lines, batches, strict=True):
        assert line["keys"] == batch[BatchField.SAMPLE_INDEX].tolist()
        assert line["sources"] == batch[SAMPLE_SOURCE].tolist()


def test_masks_are_drawn_per_source_and_from_its_own_epoch(vocab):  # noqa: F811
    """Sample key 3 from source 0 in its epoch 0 and from source 1 in its epoch 2: each row's
    masks are a one-source draw's with the key 3 ^ (k + 1) << 48 and that epoch."""
    masking = masking_of(vocab)
    data = static_example(3)[0].encode(2)
    decoded = list(decode_samples([RawSample(3, data, "s"), RawSample(3, data, "s")]))
    mixed = (np.array([0, 1]), np.array([0, 2]))
    batch = collate(decoded, masking=masking, seed=8, epoch=5, mixed=mixed)
    assert batch[SAMPLE_SOURCE].tolist() == [0, 1]
    assert batch[BatchField.SAMPLE_INDEX].tolist() == [3, 3]  # the key within its source
    rows = [by_sample([{k: v[i : i + 1] for k, v in batch.items()}])[3] for i in (0, 1)]
    for row, (source, epoch) in zip(rows, ((0, 0), (1, 2)), strict=True):
        key = 3 ^ (source + 1) << SOURCE_KEY_SHIFT
        alone = list(decode_samples([RawSample(key, data, "s")]))
        assert by_sample([collate(alone, masking=masking, seed=8, epoch=epoch)])[key] == row
    assert rows[0][1] != rows[1][1]  # equal keys, other sources: other masked positions


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            {"bucket_window": 2},
            "--bucket-window 2 with a mix: a length-bucket group would span the windows of "
            "several sources; leave --bucket-window at 0 with --mix",
        ),
        (
            {"drop_last": False},
            "a mix is read for training only: evaluate each of its sources with its own loader",
        ),
        (
            {"world_size": 4, "accumulation": 8},  # G = 96 > source b's 90 samples
            "source 'b' has 90 train samples, less than one global batch of 96: its order "
            "(one source's) needs a whole one; use a smaller batch or more data",
        ),
    ],
)
def test_a_mix_the_loader_cannot_draw_is_refused_before_any_read(mix, flags, message):
    with pytest.raises(DataConfigError, match=re.escape(message)):
        PretrainingLoader(mix, LoaderConfig(3, **flags))
