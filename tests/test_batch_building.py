"""The example stage builds and masks a document's pairs as arrays laid end to end
(pairs_input_ids, mask_flat): the same ids, masks and draws as one input at a time."""

from __future__ import annotations

import numpy as np

from pipelines.bert.draws import RandomStream
from pipelines.bert.masking import MaskingConfig, mask_batch, mask_flat
from pipelines.bert.pairs import SentencePair, pair_input_ids, pairs_input_ids

CLS, SEP, MASK = 2, 3, 4


def random_pairs(rng: np.random.Generator, document: np.ndarray, partners: list) -> list:
    pairs = []
    for _ in range(int(rng.integers(1, 40))):
        a_start = int(rng.integers(0, len(document) - 60))
        a_end = a_start + int(rng.integers(1, 40))
        if rng.random() < 0.5:
            partner = int(rng.integers(0, len(partners)))
            b_start = int(rng.integers(0, len(partners[partner]) - 1))
            b_end = int(rng.integers(b_start + 1, len(partners[partner]) + 1))
        else:
            partner, b_start, b_end = -1, a_end, a_end + int(rng.integers(1, 20))
        pairs.append(SentencePair(a_start, a_end, b_start, b_end, partner))
    return pairs


def test_pairs_input_ids_are_pair_input_ids_end_to_end() -> None:
    rng = np.random.default_rng(7)
    document = rng.integers(5, 30_000, 400).astype(np.uint16)
    partners = [rng.integers(5, 30_000, int(n)).astype(np.uint16) for n in (12, 90, 300)]
    for _ in range(50):
        pairs = random_pairs(rng, document, partners)
        flat, lengths, a_lengths = pairs_input_ids(pairs, document, partners, CLS, SEP)
        one_by_one = [
            pair_input_ids(p, document, partners[p.partner] if p.is_random_next else None, CLS, SEP)
            for p in pairs
        ]
        assert flat.dtype == np.int64
        assert np.array_equal(flat, np.concatenate([ids for ids, _ in one_by_one]))
        assert lengths.tolist() == [len(ids) for ids, _ in one_by_one]
        assert a_lengths.tolist() == [a for _, a in one_by_one]


def test_mask_flat_masks_and_draws_as_mask_batch() -> None:
    config = MaskingConfig(0.15, 20, MASK, np.arange(5, 1000, dtype=np.int64))
    rng = np.random.default_rng(3)
    for seed in range(30):
        lengths = rng.integers(4, 129, int(rng.integers(1, 300))).astype(np.int64)
        a_lengths = np.array([int(rng.integers(2, n - 1)) for n in lengths], dtype=np.int64)
        inputs = [rng.integers(5, 1000, int(n)).astype(np.int64) for n in lengths]
        specials = [(0, a - 1, n - 1) for a, n in zip(a_lengths, lengths, strict=True)]
        ours, theirs = RandomStream("t", seed), RandomStream("t", seed)
        expected = mask_batch(inputs, specials, config, theirs)
        starts = np.cumsum(lengths) - lengths
        flat_specials = np.stack([starts, starts + a_lengths - 1, starts + lengths - 1], axis=1)
        batch = mask_flat(
            np.concatenate(inputs),
            lengths,
            flat_specials.ravel(),
            np.full(len(lengths), 3),
            config,
            ours,
        )
        ends = np.cumsum(batch.counts)
        for i, masked in enumerate(expected):
            first, last = ends[i] - batch.counts[i], ends[i]
            start = batch.starts[i]
            assert np.array_equal(batch.input_ids[start : start + lengths[i]], masked.input_ids)
            assert np.array_equal(batch.positions[first:last], masked.positions)
            assert np.array_equal(batch.labels[first:last], masked.labels)
        assert ours.random() == theirs.random()  # the streams drew alike


def test_smallest_keys_break_ties_by_position_as_a_stable_sort() -> None:
    from pipelines.bert.masking import _smallest_keys

    rng = np.random.default_rng(11)
    for _ in range(50):
        lengths = rng.integers(1, 40, int(rng.integers(1, 50))).astype(np.int64)
        starts = np.cumsum(lengths) - lengths
        keys = np.round(rng.random(int(lengths.sum())), 1)  # many equal keys
        counts = np.array([int(rng.integers(0, n + 1)) for n in lengths], dtype=np.int64)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        order = np.lexsort((keys, owner))  # by input, then key, ties by position
        rank = np.arange(len(keys)) - starts[owner[order]]
        expected = np.sort(order[rank < counts[owner[order]]])
        assert np.array_equal(_smallest_keys(keys, lengths, starts, counts), expected)
