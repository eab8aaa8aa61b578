"""Dynamic masking (trainer/masking.py): the rules on literal input, the same draws whatever
the batching, the statistics over 20,000 sequences, and the loader's masks through workers,
epochs, seeds and a resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pipelines.beam.shards import write_shard
from pipelines.io.shards import ShardReadError
from pipelines.io.vocabulary import Vocabulary, load_vocab_txt, vocab_txt_bytes
from schemas.batch import IGNORE_INDEX, BatchField
from schemas.examples import SHARDS_MANIFEST_NAME, PretrainingExample, sample_key
from schemas.shards import SequenceOutput, ShardsManifest, SplitShards
from trainer.collate import FixedShape, SampleLimits, collate
from trainer.data import (
    DataPosition,
    LoaderConfig,
    PretrainingLoader,
    RawSample,
    decode_samples,
    open_source,
)
from trainer.masking import (
    DynamicMasking,
    _choose_pieces,
    draw_masks,
    restore_originals,
    token_hashes,
)

# A tiny vocabulary: the five special tokens, two unused slots, 150 words, 40 `##` pieces.
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
WORDS = range(7, 157)
PIECES = range(157, 197)
TOKENS = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[unused0]",
    "[unused1]",
    *(f"w{i}" for i in range(len(WORDS))),
    *(f"##p{i}" for i in range(len(PIECES))),
]
SPECIAL = {PAD, UNK, CLS, SEP, MASK, 5, 6}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> Vocabulary:
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_bytes(vocab_txt_bytes(TOKENS))
    return load_vocab_txt(str(path), cased=False)


def masking_of(vocab: Vocabulary, **flags) -> DynamicMasking:
    return DynamicMasking.from_vocab(vocab, **flags)


# --------------------------------------------------------------------------- literal rules


def test_from_vocab_never_predicts_the_special_tokens_but_unk(vocab):
    masking = masking_of(vocab)
    assert np.flatnonzero(masking.never_predicted).tolist() == [PAD, CLS, SEP, MASK, 5, 6]
    assert masking.mask_id == MASK
    assert masking.replaceable_ids.tolist() == [*WORDS, *PIECES]
    assert np.flatnonzero(masking.is_continuation).tolist() == list(PIECES)
    assert masking.vocab_size == len(TOKENS)


def test_the_count_is_googles_rounded_half_to_even_and_bounded(vocab):
    masking = masking_of(vocab)
    # 3 × 0.15 = 0.45 → at least 1; 10 → 1.5 → 2; 30 → 4.5 → 4 (half to even, as Python's
    # round in Google's code); 128 → 19.2 → 19; 512 → 76.8 → 77.
    assert masking.counts(np.array([3, 10, 30, 128, 512])).tolist() == [1, 2, 4, 19, 77]
    assert masking.max_predictions_for(128) == 19
    assert masking.max_predictions_for(512) == 77
    capped = masking_of(vocab, max_predictions=20)
    assert capped.counts(np.array([128, 512])).tolist() == [19, 20]
    assert capped.max_predictions_for(512) == 20


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"rate": 0.0}, "--mask-rate 0.0"),
        ({"rate": 1.0}, "--mask-rate 1.0"),
        ({"replace": (0.8, 0.1, 0.2)}, "--mask-replace"),
        ({"max_predictions": 0}, "--max-predictions 0"),
    ],
)
def test_from_vocab_refuses_flags_that_mean_nothing(vocab, flags, message):
    with pytest.raises(ValueError, match=message):
        masking_of(vocab, **flags)


def test_restore_originals_puts_the_labels_back():
    ids = np.array([[2, 4, 8, 4, 3, 0], [2, 9, 3, 0, 0, 0]])
    positions = np.array([[1, 3, 0], [0, 0, 0]])
    labels = np.array([[11, 12, -100], [-100, -100, -100]])
    restore_originals(ids, positions, labels, np.array([2, 0]))  # row 1: --masking none
    assert ids.tolist() == [[2, 11, 8, 12, 3, 0], [2, 9, 3, 0, 0, 0]]


def test_every_candidate_is_masked_when_the_count_reaches_them(vocab):
    masking = masking_of(vocab, rate=0.99, replace=(1.0, 0.0, 0.0))
    # [CLS] w0 [UNK] [SEP] w1 [SEP] then [PAD]: 6 tokens → 6 wanted, 3 candidates ([UNK] one).
    ids = np.array([[CLS, 7, UNK, SEP, 8, SEP, PAD, PAD]])
    positions, labels = draw_masks(masking, ids, np.array([6]), np.array([0]), 1, 0)
    assert ids.tolist() == [[CLS, MASK, MASK, SEP, MASK, SEP, PAD, PAD]]
    assert positions.tolist() == [[1, 2, 4, 0, 0, 0, 0, 0]]
    assert labels.tolist() == [[7, UNK, 8, *[IGNORE_INDEX] * 5]]


def test_the_draws_are_pinned(vocab):
    """The masks are a function of (seed, epoch, sample key) alone; a change to them is a
    deliberate one: a run resumed across it would see other masks than it would have."""
    masking = masking_of(vocab)
    original = [CLS, *range(7, 20), SEP, *range(30, 44), SEP]  # 30 tokens: 4 predictions
    ids = np.array([original])
    positions, labels = draw_masks(masking, ids, np.array([30]), np.array([21]), 12345, 0)
    assert positions.tolist() == [PINNED_POSITIONS + [0] * 4]
    assert labels.tolist() == [[original[p] for p in PINNED_POSITIONS] + [IGNORE_INDEX] * 4]
    assert [ids[0, p] for p in PINNED_POSITIONS] == [MASK, MASK, 38, MASK]  # one random


PINNED_POSITIONS = [11, 12, 13, 25]


def splitmix64(z: int) -> int:
    """splitmix64's finalizer on a Python integer: the definition the numpy code follows."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return z ^ (z >> 31)


def test_token_hashes_are_splitmix64_of_seed_epoch_key_and_position():
    seed, epoch, keys = 2**63 - 1, 41, [0, 7, 10**11]
    for width in (130, 7):
        got = token_hashes(seed, epoch, np.array(keys), width)
        for row, key in enumerate(keys):
            state = splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ key)
            outputs = [splitmix64((state + n * 0x9E3779B97F4A7C15) % 2**64) for n in range(1, 66)]
            halves = [half for out in outputs for half in (out % 2**32, out >> 32)]
            assert got[row].tolist() == halves[:width]


def test_a_tie_of_hashes_goes_to_the_lower_position():
    """Rank keys are (hash, position): the count-th smallest hash shared (one pair of tokens
    in 2**32) is broken by position; a candidate whose hash is 2**32 - 1, the mark of a
    non-candidate, is still taken before none."""
    candidates = np.array(
        [
            [False, True, True, True, True, True, True, False],
            [False, True, True, False, False, False, False, False],
            [False] * 8,
        ]
    )
    top = 2**32 - 1
    hashes = np.array(
        [[0, 5, 3, 3, 3, 9, 1, 0], [0, top, top, 7, 7, 7, 7, 7], [1, 2, 3, 4, 5, 6, 7, 8]],
        dtype=np.uint32,
    )
    positions = _choose_pieces(candidates, hashes, np.array([3, 2, 0]))
    assert positions.tolist() == [[2, 3, 6, 0, 0, 0, 0, 0], [1, 2, 0, 0, 0, 0, 0, 0], [0] * 8]


def test_whole_words_are_taken_whole_or_skipped(vocab):
    """[CLS] w0 ##p0 w1 [SEP]: 5 tokens at 0.5 → 2 predictions; the words are {w0 ##p0} and
    {w1}. Visited first, {w0 ##p0} fills the count; {w1} first leaves room 1, and the
    two-piece word that would overshoot is skipped (Google's rule): half the keys each."""
    masking = masking_of(vocab, rate=0.5, whole_word=True, replace=(1.0, 0.0, 0.0))
    seen = {}
    for key in range(400):
        ids = np.array([[CLS, 7, 157, 8, SEP, PAD, PAD, PAD]])
        positions, _ = draw_masks(masking, ids, np.array([5]), np.array([key]), 3, 0)
        chosen = tuple(p for p in positions[0].tolist() if p)
        seen[chosen] = seen.get(chosen, 0) + 1
        assert ids[0, list(chosen)].tolist() == [MASK] * len(chosen)
    assert set(seen) == {(1, 2), (3,)}
    assert 150 < seen[(1, 2)] < 250


# --------------------------------------------------------------------------- statistics


def random_batch(rng: np.random.Generator, size: int, width: int = 128, pieces: float = 0.3):
    """`size` sequences [CLS] A [SEP] B [SEP] of 8 to `width` tokens: words and `##` pieces
    (a share `pieces` of the tokens), 2 % [UNK]; (ids (B, width), lengths)."""
    lengths = rng.integers(8, width + 1, size)
    ids = rng.choice(np.array(WORDS), (size, width))
    pieces = rng.random((size, width)) < pieces
    ids[pieces] = rng.choice(np.array(PIECES), int(pieces.sum()))
    ids[rng.random((size, width)) < 0.02] = UNK
    ids[:, 0] = CLS
    a_lengths = rng.integers(3, lengths - 1)
    rows = np.arange(size)
    ids[rows, a_lengths - 1] = SEP
    ids[rows, lengths - 1] = SEP
    ids[np.arange(width) >= lengths[:, None]] = PAD
    return ids, lengths


def word_spans(masking: DynamicMasking, ids, length: int) -> list[list[int]]:
    """The candidates as a plain loop: every token but [PAD] [CLS] [SEP] [MASK] [unusedN]
    and position 0; with whole words, a `##` piece right after a candidate joins its word."""
    spans: list[list[int]] = []
    for position in range(1, length):
        token = int(ids[position])
        if token in (PAD, CLS, SEP, MASK, 5, 6):
            continue
        joins = masking.whole_word and spans and spans[-1][-1] == position - 1
        if joins and masking.is_continuation[token]:
            spans[-1].append(position)
        else:
            spans.append([position])
    return spans


def googles_choice(masking: DynamicMasking, ids, length: int, hashes) -> list[int]:
    """The rule as a plain loop over one sequence: the candidates visited in the order of
    (hash, position) of their first piece, a word that would overshoot the count skipped
    (pipelines/bert/masking.py's `_mask_whole_words`)."""
    spans = word_spans(masking, ids, length)
    count = min(int(masking.counts(np.array([length]))[0]), sum(len(s) for s in spans))
    chosen: list[int] = []
    for span in sorted(spans, key=lambda s: (int(hashes[s[0]]), s[0])):
        if len(chosen) >= count:
            break
        if len(chosen) + len(span) <= count:
            chosen += span
    return sorted(chosen)


@pytest.mark.parametrize(
    ("whole_word", "pieces", "rate"),
    [
        (False, 0.3, 0.15),
        (True, 0.3, 0.15),
        # Long words and few predictions: most words overshoot, the visit goes on past the
        # first window of words (trainer.masking._choose_whole_words).
        (True, 0.85, 0.03),
    ],
)
def test_the_vectorised_draw_is_the_plain_loop_of_the_rule(vocab, whole_word, pieces, rate):
    masking = masking_of(vocab, whole_word=whole_word, rate=rate)
    rng = np.random.default_rng(5)
    for batch in range(4):
        ids, lengths = random_batch(rng, 500, pieces=pieces)
        keys = np.arange(batch * 500, (batch + 1) * 500)
        hashes = token_hashes(99, 4, keys, ids.shape[1])
        original = ids.copy()
        positions, labels = draw_masks(masking, ids, lengths, keys, 99, 4)
        for row in range(len(ids)):
            expected = googles_choice(masking, original[row], int(lengths[row]), hashes[row])
            real = labels[row] != IGNORE_INDEX
            assert positions[row, real].tolist() == expected
            assert labels[row, real].tolist() == original[row, expected].tolist()
            assert not positions[row, ~real].any()


@pytest.mark.parametrize("whole_word", [False, True])
def test_statistics_over_20000_sequences(vocab, whole_word):
    masking = masking_of(vocab, whole_word=whole_word)
    rng = np.random.default_rng(11)
    shares = np.zeros(3)  # [MASK], kept, random
    for batch in range(40):
        ids, lengths = random_batch(rng, 500)
        original = ids.copy()
        keys = np.arange(batch * 500, (batch + 1) * 500)
        positions, labels = draw_masks(masking, ids, lengths, keys, 1, 0)
        real = labels != IGNORE_INDEX
        counts = real.sum(axis=1)
        wanted = np.maximum(1, np.round(lengths * 0.15))
        if whole_word:  # Google's rule fills the count but for a word that would overshoot
            assert (counts <= wanted).all() and (counts >= wanted - 3).all()
            assert counts.sum() > 0.98 * wanted.sum()
        else:
            assert counts.tolist() == wanted.tolist()
        rows = np.nonzero(real)[0]
        places = positions[real]
        now, before = ids[rows, places], original[rows, places]
        assert not np.isin(before, [PAD, CLS, SEP, MASK]).any()  # never predicted
        assert (before == UNK).any()  # [UNK] is, as in Google's masker
        unchanged = np.ones(ids.shape, dtype=bool)
        unchanged[rows, places] = False
        assert (ids[unchanged] == original[unchanged]).all()  # only predictions change
        randomised = (now != MASK) & (now != before)
        assert not np.isin(now[randomised], list(SPECIAL)).any()
        shares += [(now == MASK).sum(), (now == before).sum(), randomised.sum()]
        if whole_word and batch < 4:  # its rows one by one in Python: 2,000 of them
            check_whole_words(masking, original, lengths, real, positions, ids)
    shares /= shares.sum()
    # 10 % random includes the 1 in 190 draws that give the original back (counted as kept).
    assert abs(shares[0] - 0.8) < 0.005
    assert abs(shares[1] - 0.1 - 0.1 / 190) < 0.005
    assert abs(shares[2] - 0.1 + 0.1 / 190) < 0.005


def check_whole_words(masking, original, lengths, real, positions, ids) -> None:
    """Every word is predicted whole or not at all (so no `##` piece without its word's
    first piece), its pieces all [MASK] or none of them."""
    for row in range(len(original)):
        chosen = set(positions[row, real[row]].tolist())
        for span in word_spans(masking, original[row], int(lengths[row])):
            taken = [p in chosen for p in span]
            assert all(taken) or not any(taken), f"a word predicted in part: {span}"
            masked = ids[row, span] == MASK
            assert masked.all() or not masked.any(), f"a word half [MASK]: {span}"


def test_100_0_0_masks_every_prediction_and_0_0_100_none(vocab):
    rng = np.random.default_rng(2)
    ids, lengths = random_batch(rng, 1000)
    for replace, expected in (((1.0, 0.0, 0.0), True), ((0.0, 0.0, 1.0), False)):
        masked_ids = ids.copy()
        positions, labels = draw_masks(
            masking_of(vocab, replace=replace), masked_ids, lengths, np.arange(1000), 1, 0
        )
        real = labels != IGNORE_INDEX
        now = masked_ids[np.nonzero(real)[0], positions[real]]
        assert ((now == MASK) == expected).all()
        if not expected:
            assert np.isin(now, masking_of(vocab).replaceable_ids).all()


# --------------------------------------------------------------------------- in the loader


def static_example(index: int) -> tuple[PretrainingExample, list[int]]:
    """Sample `index`, statically masked (a fifth of its tokens [MASK] or random), and its
    original tokens."""
    rng = np.random.default_rng(index)
    a = rng.choice(np.array([*WORDS, *PIECES]), int(rng.integers(4, 30))).tolist()
    b = rng.choice(np.array([*WORDS, *PIECES]), int(rng.integers(4, 30))).tolist()
    original = [CLS, *a, SEP, *b, SEP]
    candidates = [p for p, t in enumerate(original) if t not in (CLS, SEP)]
    positions = sorted(rng.choice(candidates, max(1, len(original) // 5), replace=False))
    ids = list(original)
    for position in positions:
        ids[position] = MASK if rng.random() < 0.8 else int(rng.choice(np.array(WORDS)))
    example = PretrainingExample(
        input_ids=np.array(ids, dtype=np.uint16),
        segment_a_length=len(a) + 2,
        masked_lm_positions=np.array(positions, dtype=np.uint16),
        masked_lm_ids=np.array([original[p] for p in positions], dtype=np.uint16),
        next_sentence_label=index % 2,
        doc_a=f"d{index}",
        doc_b=f"d{index}",
        dupe_pass=0,
    )
    return example, original


def write_static_shards(root: Path, sizes=(13, 17, 10)) -> Path:
    shards_dir = root / "shards"
    (shards_dir / "seq128" / "train").mkdir(parents=True)
    infos, first = [], 0
    for number, size in enumerate(sizes):
        samples = [
            (sample_key(i), static_example(i)[0].encode(2)) for i in range(first, first + size)
        ]
        infos.append(write_shard(str(shards_dir), f"seq128/train/shard-{number:06d}.tar", samples))
        first += size
    split = SplitShards(samples=first, not_next=0, tokens=0, predictions=0, shards=infos)
    manifest = ShardsManifest(
        vocab={"path": "vocab", "sha256": "ab" * 32, "size": len(TOKENS), "cased": False},
        inputs=[],
        config={},
        layout={},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={"seq128": SequenceOutput(128, 20, {"train": split})},
    )
    (shards_dir / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    return shards_dir


def by_sample(batches) -> dict[int, tuple]:
    """Each sample's row, padding cut: (input_ids, positions, labels)."""
    rows = {}
    for batch in batches:
        lengths = batch[BatchField.ATTENTION_MASK].sum(dim=1).tolist()
        for row, key in enumerate(batch[BatchField.SAMPLE_INDEX].tolist()):
            labels = batch[BatchField.MASKED_LABELS][row]
            real = labels != IGNORE_INDEX
            rows[key] = (
                tuple(batch[BatchField.INPUT_IDS][row, : lengths[row]].tolist()),
                tuple(batch[BatchField.MASKED_POSITIONS][row, real].tolist()),
                tuple(labels[real].tolist()),
            )
    return rows


def unmasked(row: tuple) -> list[int]:
    ids, positions, labels = row
    ids = list(ids)
    for position, label in zip(positions, labels, strict=True):
        ids[position] = label
    return ids


def test_the_same_sample_gets_the_same_masks_in_any_batch(vocab):
    masking = masking_of(vocab)
    decoded = list(
        decode_samples(RawSample(i, static_example(i)[0].encode(2), "s") for i in range(60))
    )
    whole = by_sample([collate(decoded, masking=masking, seed=8, epoch=3)])
    backwards = decoded[::-1]
    chunks = [backwards[i : i + 7] for i in range(0, 60, 7)]
    assert by_sample([collate(c, masking=masking, seed=8, epoch=3) for c in chunks]) == whole
    for key, row in whole.items():
        assert unmasked(row) == static_example(key)[1]  # the stored masks were undone
        assert row[0] != tuple(static_example(key)[0].input_ids.tolist())  # new ones drawn


def test_a_shard_without_masks_is_masked_from_its_tokens(vocab):
    example, original = static_example(3)
    example.input_ids = np.array(original, dtype=np.uint16)
    example.masked_lm_positions = np.array([], dtype=np.uint16)
    example.masked_lm_ids = np.array([], dtype=np.uint16)
    decoded = list(decode_samples([RawSample(3, example.encode(2), "s")]))
    row = by_sample([collate(decoded, masking=masking_of(vocab))])[3]
    assert unmasked(row) == original
    assert len(row[1]) == round(len(original) * 0.15)


def test_stored_fields_are_checked_before_the_masks_are_undone(vocab):
    example, _ = static_example(4)
    example.masked_lm_positions[0] = 200  # outside its tokens
    decoded = list(decode_samples([RawSample(4, example.encode(2), "shard.tar")]))
    with pytest.raises(ShardReadError, match="sample 000000000004 has a masked position"):
        collate(decoded, masking=masking_of(vocab))
    example, _ = static_example(5)
    example.input_ids[1] = 500  # past the masking's vocabulary; no manifest says its size
    decoded = list(decode_samples([RawSample(5, example.encode(2), "shard.tar")]))
    with pytest.raises(ShardReadError, match="a token id past the vocabulary's 197"):
        collate(decoded, SampleLimits(max_tokens=128), masking=masking_of(vocab))


def epoch_rows(shards_dir: Path, masking, position: DataPosition, **config) -> list[dict]:
    config = {"num_workers": 0, "seed": 5, "shuffle_buffer": 8, **config}
    loader = PretrainingLoader(
        open_source(str(shards_dir)), LoaderConfig(4, masking=masking, **config)
    )
    return list(loader.epoch(position))


def test_the_loaders_masks_depend_on_seed_epoch_and_key_only(tmp_path, vocab):
    shards_dir = write_static_shards(tmp_path)
    masking = masking_of(vocab)
    first = by_sample(epoch_rows(shards_dir, masking, DataPosition(0)))
    assert len(first) == 40
    assert by_sample(epoch_rows(shards_dir, masking, DataPosition(0), num_workers=2)) == first
    for key, row in first.items():
        assert unmasked(row) == static_example(key)[1]
    for other in (
        by_sample(epoch_rows(shards_dir, masking, DataPosition(1))),
        by_sample(epoch_rows(shards_dir, masking, DataPosition(0), seed=6)),
    ):
        assert other.keys() == first.keys()
        assert all(unmasked(other[key]) == unmasked(first[key]) for key in first)
        assert sum(other[key][1] == first[key][1] for key in first) <= 4  # a new draw


def test_a_resumed_epoch_gives_the_same_masked_batches(tmp_path, vocab):
    shards_dir = write_static_shards(tmp_path)
    masking = masking_of(vocab, whole_word=True)
    whole = epoch_rows(shards_dir, masking, DataPosition(2))
    resumed = epoch_rows(shards_dir, masking, DataPosition(2, 4))
    assert len(whole) == 10 and len(resumed) == 6
    for expected, got in zip(whole[4:], resumed, strict=True):
        assert expected.keys() == got.keys()
        assert all(torch.equal(expected[name], got[name]) for name in expected)


def test_the_compile_shape_holds_every_batch(tmp_path, vocab):
    shards_dir = write_static_shards(tmp_path)
    masking = masking_of(vocab, rate=0.5, max_predictions=20)
    fixed = FixedShape.of(128, masking.max_predictions_for(128))
    for batch in epoch_rows(shards_dir, masking, DataPosition(), pad_to=fixed):
        assert batch[BatchField.INPUT_IDS].shape[1] == 128
        assert batch[BatchField.MASKED_POSITIONS].shape[1] == 24
        assert batch[BatchField.MASKED_LABELS].shape[1] == 24
