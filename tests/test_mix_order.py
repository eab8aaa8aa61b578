"""A mix's order (trainer/mix.py) on literal input: how many samples each global batch takes
from each source, the shares over 20,000 samples, C_k(b) computed directly for any b, the
slots' deal, and a source's positions running into its next epoch's order."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from trainer.data import DataPosition
from trainer.mix import (
    MixCursor,
    MixedSource,
    MixError,
    MixOrder,
    SourceWindows,
    batch_per_source,
    drawn_per_source,
)
from trainer.order import EpochOrder, _draws, _ranked, permutation
from trainer.samples import HeldSamples
from trainer.splitmix import mix, mix_int


@dataclasses.dataclass(frozen=True)
class Counted:
    """What the mix's order reads of a DataSource: its sample count (nothing is read)."""

    samples: int
    split: str = "train"
    max_seq_length: int | None = 128
    manifest_url: str | None = None
    shards: tuple = ()


def mix_of(*sizes: int, weights: tuple[float, ...]) -> MixedSource:
    names = tuple("abcdefgh"[: len(sizes)])
    return MixedSource(tuple(Counted(size) for size in sizes), names, weights)


def at_offset_zero(source: MixedSource, global_batch: int) -> MixOrder:
    """θ = 0: u_b = frac(b·φ), 0, 0.618, 0.236, 0.854, 0.472, 0.090, … (φ = 1.618…)."""
    return dataclasses.replace(MixOrder.of(source, global_batch, seed=1), offset=0)


def test_each_batch_takes_the_floor_and_the_extra_slots_go_by_the_weyl_points():
    # 0.7·32 = 22.4, 0.3·32 = 9.6: 22 and 9 each batch, r = 1 extra slot; source a's part
    # of [0, 1) is [0, 0.4), b's [0.4, 1). u_b = 0 → a, 0.618 → b, 0.236 → a, 0.854 → b,
    # 0.472 → b, 0.090 → a.
    order = at_offset_zero(mix_of(1000, 1000, weights=(0.7, 0.3)), 32)
    assert order.counts(0, 6).tolist() == [[23, 9], [22, 10], [23, 9], [22, 10], [22, 10], [23, 9]]
    # 0.5, 0.25, 0.25 of 6: 3, 1.5, 1.5: a always 3; the one extra slot to b on [0, 0.5),
    # to c on [0.5, 1).
    order = at_offset_zero(mix_of(100, 100, 100, weights=(0.5, 0.25, 0.25)), 6)
    assert order.counts(0, 4).tolist() == [[3, 2, 1], [3, 1, 2], [3, 2, 1], [3, 1, 2]]
    # Shares that divide G: no extra slot, the same counts every batch.
    order = MixOrder.of(mix_of(100, 100, weights=(0.7, 0.3)), 10, seed=5)
    assert order.counts(0, 100).tolist() == [[7, 3]] * 100


def test_weights_are_exact_fractions():
    # 0.29·100 is 28.999999999999996 in binary floats: the floor must still be 29.
    order = MixOrder.of(mix_of(500, 500, weights=(0.29, 0.71)), 100, seed=3)
    assert order.counts(0, 50).tolist() == [[29, 71]] * 50


@pytest.mark.parametrize("seed", [12345, 7])
def test_shares_over_20000_samples_and_every_batch_within_its_rounding(seed):
    global_batch = 32  # 625 global batches: 20,000 samples
    order = MixOrder.of(mix_of(5000, 3000, weights=(0.7, 0.3)), global_batch, seed)
    counts = order.counts(0, 625)
    assert (counts.sum(axis=1) == global_batch).all()
    assert set(counts[:, 0].tolist()) == {22, 23} and set(counts[:, 1].tolist()) == {9, 10}
    shares = counts.sum(axis=0) / 20_000
    assert abs(shares[0] - 0.7) <= 0.01 and abs(shares[1] - 0.3) <= 0.01
    # Tighter than the goal: C_k(b) within a few samples of p_k·G·b at every b.
    drawn = np.cumsum(counts, axis=0)
    ideal = np.arange(1, 626)[:, None] * np.array([22.4, 9.6])
    assert np.abs(drawn - ideal).max() < 3


def test_the_drawn_counts_stay_within_a_few_samples_for_a_million_batches():
    order = MixOrder.of(mix_of(10**6, 10**6, 10**6, weights=(0.5, 0.3, 0.2)), 33, seed=9)
    drawn = np.cumsum(order.counts(0, 10**6), axis=0)
    ideal = np.arange(1, 10**6 + 1)[:, None] * (np.array([0.5, 0.3, 0.2]) * 33)
    assert np.abs(drawn - ideal).max() < 4


def test_drawn_is_computed_directly_for_any_batch():
    order = MixOrder.of(mix_of(800, 300, weights=(0.6, 0.4)), 24, seed=2)
    counts = order.counts(0, 3000)
    for batch in (0, 1, 17, 2999, 3000):
        assert order.drawn(batch).tolist() == counts[:batch].sum(axis=0).tolist()
    cursor = MixCursor(order)  # forward by sums, backward or far afresh: the same numbers
    for batch in (5, 6, 400, 2, 3000):
        assert cursor.move(batch).tolist() == counts[:batch].sum(axis=0).tolist()


def test_the_api_names_the_counts_by_source():
    source = MixedSource((Counted(700), Counted(300)), ("domain", "wiki"), (0.7, 0.3))
    # 1000 samples / 10 = 100 global batches a nominal epoch: epoch 1, batch 5 is batch 105.
    assert drawn_per_source(source, 1, 10, DataPosition(1, 5)) == {"domain": 735, "wiki": 315}
    assert batch_per_source(source, 1, 10, DataPosition(0, 3)) == {"domain": 7, "wiki": 3}
    assert drawn_per_source(source, 1, 10, DataPosition()) == {"domain": 0, "wiki": 0}


def test_the_slots_deal_every_sample_of_the_batch_once():
    order = MixOrder.of(mix_of(900, 900, 900, weights=(0.5, 0.3, 0.2)), 40, seed=4)
    counts = order.counts(7, 1)[0]
    sources, ranks = order.slot_sources(7, counts)
    for number, count in enumerate(counts.tolist()):
        assert sorted(ranks[sources == number].tolist()) == list(range(count))
    again = order.slot_sources(7, counts)
    assert sources.tolist() == again[0].tolist() and ranks.tolist() == again[1].tolist()
    assert sources.tolist() != order.slot_sources(8, counts)[0].tolist()  # drawn per batch
    # Dealt, not in blocks: each quarter (a micro-batch of 10) holds more than one source.
    assert all(len(set(sources[i : i + 10].tolist())) > 1 for i in range(0, 40, 10))


def test_the_deal_is_a_permutation_drawn_from_the_seed_and_the_batch():
    """Batch b's samples (source 0's in rank order, then source 1's) go to the slots by
    permutation(mix(mix(slot key) ^ b)), drawn for many batches at once."""
    order = MixOrder.of(mix_of(900, 900, weights=(0.7, 0.3)), 12, seed=4)
    counts = order.counts(30, 5)
    sources, ranks = order.slots(30, counts)
    for row, batch in enumerate(range(30, 35)):
        dealt = permutation(mix_int(mix_int(order.slot_key) ^ batch), 12)
        items = [(0, rank) for rank in range(counts[row, 0])]
        items += [(1, rank) for rank in range(counts[row, 1])]
        expected = [items[i] for i in dealt.tolist()]
        assert list(zip(sources[row].tolist(), ranks[row].tolist(), strict=True)) == expected
        alone = order.slot_sources(batch, counts[row])
        assert alone[0].tolist() == sources[row].tolist()


@pytest.mark.parametrize("size", [1, 2, 12, 256, 10_000, 70_000])
def test_a_permutation_ranks_its_draws_as_a_stable_argsort(size):
    """The draws are ranked by one sort of packed values (index in the low 16 bits), or by
    the argsort past 2**16 draws: the same indices as a stable argsort either way."""
    states = mix(np.arange(1, 4, dtype=np.uint64) * np.uint64(0x1234567))
    draws = _draws(states, size)
    assert np.array_equal(_ranked(draws), np.argsort(draws, axis=1, kind="stable"))


def test_draws_equal_in_their_upper_bits_are_ranked_by_the_whole_draw():
    # Rows 0 and 2: two draws share their upper 48 bits, and the lower 16 order them (or
    # the index, for equal draws); row 1 has none.
    high = 5 << 16
    draws = np.array(
        [[high | 3, high | 1, 2, 7 << 16], [9, 8, 7, 6], [high, 1, high, 0]], dtype=np.uint64
    )
    assert _ranked(draws).tolist() == [[2, 1, 0, 3], [3, 2, 1, 0], [3, 1, 0, 2]]


def test_a_micro_batch_is_its_slots_of_the_global_batch():
    order = MixOrder.of(mix_of(900, 900, weights=(0.7, 0.3)), 12, seed=4)
    sources, ranks = order.slot_sources(30, order.counts(30, 1)[0])
    positions = order.drawn(30)[sources] + ranks
    # Micro-batches 1 and 3 of batch 30, then 0 of batch 32 (micro-batches of 3).
    got, at, floor = MixCursor(order).micro_batches([30, 30, 32], [1, 3, 0], 3)
    assert floor.tolist() == order.drawn(30).tolist()
    assert got.tolist() == [
        *sources[3:6].tolist(),
        *sources[9:12].tolist(),
        *order.slot_sources(32, order.counts(32, 1)[0])[0][:3].tolist(),
    ]
    assert at[:6].tolist() == [*positions[3:6].tolist(), *positions[9:12].tolist()]
    later_sources, later_ranks = order.slot_sources(32, order.counts(32, 1)[0])
    assert at[6:].tolist() == (order.drawn(32)[later_sources] + later_ranks)[:3].tolist()


def held_at(offsets: np.ndarray, shard: str) -> HeldSamples:
    """Samples keyed by their stream offsets, each holding no bytes, from `shard`."""
    zeros = np.zeros(len(offsets), np.int64)
    return HeldSamples([b""], [shard], zeros, zeros, zeros, np.asarray(offsets, np.int64))


def test_a_source_runs_into_its_next_epoch_in_that_epochs_order():
    # Source a: 50 samples, G = 8: 6 global batches, U = 48 positions an epoch. Positions
    # 46..49 of its stream are positions 46, 47 of epoch 0 and 0, 1 of epoch 1.
    source = mix_of(50, 200, weights=(0.5, 0.5))
    order = MixOrder.of(source, 8, seed=3)
    assert order.usable.tolist() == [48, 200]

    def open_reader(number, epoch):  # a sample is (stream offset, b"", "source:epoch")
        return lambda wanted: held_at(wanted, f"{number}:{epoch}")

    windows = SourceWindows(source, order, 16, True, 3, open_reader)
    held, epochs = windows.take(np.zeros(4, np.int64), np.array([46, 47, 48, 49]), np.zeros(2))
    found = [(shard, key) for key, _, shard in held.pick(slice(None))]
    # The one-source orders of epochs 0 and 1 (windows of 2 global batches, lanes permuted):
    # positions 46, 47 of epoch 0 hold stream offsets 44, 47; positions 0, 1 of epoch 1
    # offsets 0, 2 (of epoch 1's stream: its shards in that epoch's order).
    assert EpochOrder.of(50, 8, 16, True, 3, 0).sources(np.array([46, 47])).tolist() == [44, 47]
    assert EpochOrder.of(50, 8, 16, True, 3, 1).sources(np.array([0, 1])).tolist() == [0, 2]
    assert found == [("0:0", 44), ("0:0", 47), ("0:1", 0), ("0:1", 2)]
    assert epochs.tolist() == [0, 0, 1, 1]


def test_windows_are_read_whole_once_and_let_go_behind_the_floor():
    source = mix_of(64, 64, weights=(0.5, 0.5))
    order = MixOrder.of(source, 8, seed=3)
    reads = []

    def open_reader(number, epoch):
        def read(wanted):
            reads.append((number, epoch, wanted.tolist()))
            return held_at(wanted, "s")

        return read

    # Windows of 16 // 8 = 2 global batches: stream offsets [0, 16), [16, 32), …
    windows = SourceWindows(source, order, 16, True, 3, open_reader)
    three, one = np.zeros(3, np.int64), np.zeros(1, np.int64)
    windows.take(three, np.array([0, 5, 9]), np.zeros(2))
    windows.take(three, np.array([1, 2, 15]), np.zeros(2))
    assert reads == [(0, 0, list(range(16)))]
    windows.take(one, np.array([17]), np.array([16, 0]))
    assert reads[1:] == [(0, 0, list(range(16, 32)))]
    windows.take(one, np.array([3]), np.array([16, 0]))  # let go: read again
    assert reads[2:] == [(0, 0, list(range(16)))]


@pytest.mark.parametrize(
    ("names", "weights", "message"),
    [
        (("a",), (1.0,), "a mix needs at least 2 sources, got 1; pass one source alone"),
        (("a", "b"), (0.5,), "2 sources, 2 names and 1 weights: give one name and one weight"),
        (("a", "a"), (0.5, 0.5), "source names ['a', 'a'] repeat one: name each once"),
        (("a", "b"), (1.0, 0.0), "mix weights [1.0, 0.0]: every weight must be above 0"),
        (("a", "b"), (0.7, 0.4), "mix weights [0.7, 0.4] sum to 1.1: they must sum to 1"),
    ],
)
def test_a_mix_that_cannot_be_drawn_is_refused(names, weights, message):
    sources = tuple(Counted(100) for _ in names)
    with pytest.raises(MixError, match=re.escape(message)):
        MixedSource(sources, names, weights)
