"""Google's pair and masking steps, each with exact values.

The draws are scripted (`Scripted` hands out the listed values in order), so every expected
value below can be followed by hand through the steps of pipelines/bert/pairs.py and
pipelines/bert/masking.py, and a test fails if a step draws more, fewer or other values.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.bert.draws import RandomStream, document_stream
from pipelines.bert.masking import (
    MaskingConfig,
    mask_batch,
    mask_tokens,
    num_to_predict,
    word_spans,
)
from pipelines.bert.pairs import (
    SentencePair,
    create_pairs,
    pair_input_ids,
    target_length,
    truncation_cuts,
)
from pipelines.io.hashing import stable_hash64, unit_fraction

CLS, SEP, MASK = 2, 3, 4


class Scripted(RandomStream):
    """A RandomStream whose draws are listed by the test, consumed strictly in order."""

    def __init__(self, randoms=(), permutations=(), uniforms=()) -> None:
        super().__init__("scripted")
        self.randoms = list(randoms)
        self.permutations = [np.array(p) for p in permutations]
        self.uniform_blocks = [np.array(u, dtype=float) for u in uniforms]

    def random(self) -> float:
        return self.randoms.pop(0)

    def permutation(self, count: int) -> np.ndarray:
        permutation = self.permutations.pop(0)
        assert len(permutation) == count
        return permutation

    def uniforms(self, count: int) -> np.ndarray:
        block = self.uniform_blocks.pop(0)
        assert len(block) == count
        return block

    def assert_used_up(self) -> None:
        assert (self.randoms, self.permutations, self.uniform_blocks) == ([], [], [])


# --- pairs ------------------------------------------------------------------------------


def pairs_as_tokens(document, partners, rng, max_seq_length=10, short_seq_prob=0.1):
    """create_pairs on token lists: its token ranges turned back into (A, B, random, partner)."""
    flat = [t for sentence in document for t in sentence]
    other_flat = [[t for sentence in p for t in sentence] for p in partners]
    pairs = create_pairs(
        [len(s) for s in document],
        [[len(s) for s in p] for p in partners],
        max_seq_length,
        short_seq_prob,
        rng,
    )
    return [
        (
            flat[p.a_start : p.a_end],
            (other_flat[p.partner] if p.is_random_next else flat)[p.b_start : p.b_end],
            p.is_random_next,
            p.partner,
        )
        for p in pairs
    ]


def test_target_length_is_the_maximum_unless_a_short_draw():
    assert target_length(125, 0.1, Scripted([0.1])) == 125  # 0.1 is not < 0.1
    short = Scripted([0.05, 0.5])
    assert target_length(125, 0.1, short) == 2 + int(0.5 * 124)  # randint(2, 125)
    short.assert_used_up()


def test_is_next_pair_gathers_a_chunk_splits_it_and_truncates_from_random_ends():
    document = [[1, 2], [3, 4, 5], [6], [7, 8, 9, 10]]
    # target 7 (0.5 ≥ short prob); the chunk fills at sentence 4 (10 tokens); A ends after
    # sentence randint(1, 3) = 1 + int(0.4 * 3) = 2; 0.7 → IsNext, B = [6, 7, 8, 9, 10];
    # trim 10 → 7: B is not shorter, 0.2 → front; A longer, 0.9 → back; B, 0.1 → front.
    rng = Scripted([0.5, 0.4, 0.7], uniforms=[[0.2, 0.9, 0.1]])
    assert pairs_as_tokens(document, [[[99]]], rng) == [([1, 2, 3, 4], [8, 9, 10], False, -1)]
    rng.assert_used_up()


def test_random_next_takes_b_from_a_partner_and_puts_unused_sentences_back():
    document = [[1, 2, 3], [4, 5], [6, 7]]
    partners = [[[20, 21], [22]], [[30], [31, 32]]]
    # target 7; chunk = all 3 sentences (7 tokens); A ends after randint(1, 2) = 1;
    # 0.3 < 0.5 → random next from partner randint(0, 1) = 1, starting at sentence
    # randint(0, 1) = 0, until 7 - 3 = 4 tokens (the partner ends first: 3 tokens);
    # sentences 2 and 3 go back: the next chunk is [4, 5] [6, 7], split after 1, 0.8 → IsNext.
    rng = Scripted([0.9, 0.1, 0.3, 0.6, 0.2, 0.5, 0.8])
    assert pairs_as_tokens(document, partners, rng) == [
        ([1, 2, 3], [30, 31, 32], True, 1),
        ([4, 5], [6, 7], False, -1),
    ]
    rng.assert_used_up()


def test_one_sentence_chunk_is_always_random_next_without_the_coin_flip():
    # short target: randint(2, 7) = 2 + int(0.0 * 6) = 2; one sentence fills it; no 0.5 draw;
    # partner randint(0, 0), start randint(0, 0); B stops once it reaches 2 - 2 = 0 tokens.
    rng = Scripted([0.05, 0.0, 0.7, 0.3])
    assert pairs_as_tokens([[1, 2]], [[[9], [8]]], rng) == [([1, 2], [9], True, 0)]
    rng.assert_used_up()


def test_one_token_document_still_makes_a_pair():
    rng = Scripted([0.5, 0.0, 0.0])
    assert pairs_as_tokens([[7]], [[[9, 9]]], rng, max_seq_length=8) == [([7], [9, 9], True, 0)]


def test_without_partners_a_chunk_that_needs_one_makes_no_pair():
    assert (
        create_pairs([[1, 2]], [], max_seq_length=10, short_seq_prob=0.1, rng=Scripted([0.5])) == []
    )


def test_truncation_takes_from_the_longer_side():
    # A longer: 0.6 → back; A (3 > 2) again: 0.4 → front.
    assert truncation_cuts(4, 2, 4, Scripted(uniforms=[[0.6, 0.4]])) == (1, 1, 0, 0)
    assert truncation_cuts(4, 2, 6, Scripted()) == (0, 0, 0, 0)  # fits: no draw


def test_truncation_matches_google_s_token_by_token_loop():
    def google(a, b, max_num_tokens, draws):  # create_pretraining_data.truncate_seq_pair
        draws = list(draws)
        while len(a) + len(b) > max_num_tokens:
            trunc = a if len(a) > len(b) else b
            if draws.pop(0) < 0.5:
                del trunc[0]
            else:
                trunc.pop()
        return a, b

    generator = np.random.default_rng(0)
    for _ in range(300):
        la, lb, limit = generator.integers(1, 40, size=3)
        a, b = list(range(la)), list(range(100, 100 + lb))
        excess = max(0, la + lb - max(2, limit))
        draws = generator.random(excess).tolist()
        expected = google(list(a), list(b), max(2, limit), draws)
        a_front, a_back, b_front, b_back = truncation_cuts(
            len(a), len(b), max(2, limit), Scripted(uniforms=[draws] if excess else [])
        )
        assert (a[a_front : len(a) - a_back], b[b_front : len(b) - b_back]) == expected


def test_pair_input_ids_and_segment_a_length():
    document, partner = np.array([5, 6, 7, 8, 9]), np.array([40, 41, 42])
    ids, a_length = pair_input_ids(SentencePair(2, 4, 4, 5, -1), document, None, CLS, SEP)
    assert (ids.tolist(), a_length) == ([CLS, 7, 8, SEP, 9, SEP], 4)
    ids, a_length = pair_input_ids(SentencePair(0, 1, 1, 3, 0), document, partner, CLS, SEP)
    assert (ids.tolist(), a_length) == ([CLS, 5, SEP, 41, 42, SEP], 3)


# --- masking ----------------------------------------------------------------------------


def _config(
    probability: float, max_predictions: int = 20, whole_word: bool = False
) -> MaskingConfig:
    continuation = np.zeros(40, dtype=bool)
    continuation[[21, 22, 23]] = True
    return MaskingConfig(
        masked_lm_prob=probability,
        max_predictions=max_predictions,
        mask_id=MASK,
        replaceable_ids=np.arange(10, 20),
        is_continuation=continuation if whole_word else None,
    )


def test_number_of_predictions_counts_cls_and_sep_and_is_capped():
    assert num_to_predict(128, _config(0.15)) == 19  # round(19.2)
    assert num_to_predict(512, _config(0.15, max_predictions=76)) == 76  # round(76.8) capped
    assert num_to_predict(3, _config(0.15)) == 1  # at least one


def test_masking_80_10_10_on_scripted_draws():
    ids = [CLS, 10, 11, 12, SEP, 13, 14, SEP]
    # 2 predictions (round(8 × 0.25)); the keys of candidates 1 2 3 5 6 are .3 .8 .7 .6 .1
    # ([CLS]/[SEP] keys are ignored) → the two smallest: 6 and 1; choice draws 0.5 (< 0.8:
    # [MASK]) and 0.9; for the second, 0.7 ≥ 0.5 → random: replaceable[int(0.5 × 10)] = 15.
    keys = [0.0, 0.3, 0.8, 0.7, 0.0, 0.6, 0.1, 0.0]
    rng = Scripted(uniforms=[keys, [0.5, 0.9], [0.1, 0.7], [0.5]])
    masked = mask_tokens(ids, (0, 4, 7), _config(0.25), rng)
    assert masked.input_ids.tolist() == [CLS, MASK, 11, 12, SEP, 13, 15, SEP]
    assert masked.positions.tolist() == [1, 6]
    assert masked.labels.tolist() == [10, 14]
    rng.assert_used_up()


def test_kept_token_is_predicted_but_unchanged():
    ids = [CLS, 10, 11, SEP, 12, SEP]
    rng = Scripted(uniforms=[[0.0, 0.5, 0.2, 0.0, 0.9, 0.0], [0.85], [0.2], []])
    masked = mask_tokens(ids, (0, 3, 5), _config(0.1), rng)
    assert masked.input_ids.tolist() == ids
    assert (masked.positions.tolist(), masked.labels.tolist()) == ([2], [11])


def test_mask_batch_chooses_within_each_input():
    inputs = [[CLS, 10, 11, SEP, 12, SEP], [CLS, 13, SEP, 14, SEP]]
    # One prediction each (round(1.2), round(1.0)); keys: the first input's smallest
    # candidate key is .4 (position 2), the second's .2 (position 3); choice draws 0.1
    # (mask) and 0.95 then 0.3 (< 0.5: kept); no random replacement.
    keys = [*(0, 0.9, 0.4, 0, 0.5, 0), *(0, 0.3, 0, 0.2, 0)]  # first input, second input
    rng = Scripted(uniforms=[keys, [0.1, 0.95], [0.0, 0.3], []])
    first, second = mask_batch(inputs, [(0, 3, 5), (0, 2, 4)], _config(0.2), rng)
    assert (first.input_ids.tolist(), first.positions.tolist(), first.labels.tolist()) == (
        [CLS, 10, MASK, SEP, 12, SEP],
        [2],
        [11],
    )
    assert (second.input_ids.tolist(), second.positions.tolist(), second.labels.tolist()) == (
        [CLS, 13, SEP, 14, SEP],
        [3],
        [14],
    )
    rng.assert_used_up()


def test_word_spans_join_continuation_pieces_but_never_across_sep():
    ids = np.array([CLS, 10, 21, 22, 11, SEP, 23, 12, 23, SEP])
    candidates = np.ones(len(ids), dtype=bool)
    candidates[[0, 5, 9]] = False
    spans = word_spans(ids, candidates, _config(0.15, whole_word=True).is_continuation)
    assert spans == [[1, 2, 3], [4], [6], [7, 8]]


def test_whole_word_masking_decides_80_10_10_once_per_word():
    ids = [CLS, 10, 21, 22, 11, SEP, 12, 23, SEP]
    # spans [1 2 3] [4] [6 7]; 3 predictions (round(9 × 0.34)); visiting spans 2, 0, 1:
    # [6 7] fits (2), [1 2 3] would overshoot (5 > 3) and is skipped, [4] fits (3).
    # Word [6 7]: 0.9 → not masked, 0.7 → random: both pieces random (10 and 19);
    # word [4]: 0.1 → [MASK].
    rng = Scripted(permutations=[[2, 0, 1]], uniforms=[[0.9, 0.1], [0.7, 0.0], [0.0, 0.99]])
    masked = mask_tokens(ids, (0, 5, 8), _config(0.34, whole_word=True), rng)
    assert masked.input_ids.tolist() == [CLS, 10, 21, 22, MASK, SEP, 10, 19, SEP]
    assert masked.positions.tolist() == [4, 6, 7]
    assert masked.labels.tolist() == [11, 12, 23]
    rng.assert_used_up()


def test_random_replacements_come_only_from_replaceable_ids():
    config = _config(0.5)
    rng = document_stream(1, "doc", 0, 128)
    seen = set()
    for _ in range(200):
        masked = mask_tokens([CLS, *range(20, 30), SEP], (0, 11), config, rng)
        changed = masked.input_ids[masked.positions]
        seen.update(t for t in changed.tolist() if t not in (MASK, *range(20, 30)))
    assert seen and seen <= set(range(10, 20))


# --- draws ------------------------------------------------------------------------------


def test_streams_depend_only_on_their_seed_parts():
    one = [document_stream(7, "enwiki/12", 3, 128).random() for _ in range(3)]
    again = [document_stream(7, "enwiki/12", 3, 128).random() for _ in range(3)]
    assert one == again
    assert document_stream(7, "enwiki/12", 4, 128).random() != one[0]
    assert document_stream(7, "enwiki/13", 3, 128).random() != one[0]
    assert document_stream(8, "enwiki/12", 3, 128).random() != one[0]


def test_stable_hash_is_fixed_across_processes_and_versions():
    # blake2b of "a\x1f1": pinned so a change of hashing (which moves documents between
    # splits and groups) cannot slip in unnoticed.
    assert stable_hash64("a", 1) == 0xC13CD84A6BC18181
    assert unit_fraction("heldout", "enwiki/12") == pytest.approx(0.414001423)


@pytest.mark.parametrize("low,high", [(0, 0), (1, 3), (2, 125)])
def test_randint_stays_in_range(low, high):
    rng = document_stream(0, "x", 0, 128)
    values = {rng.randint(low, high) for _ in range(2000)}
    assert values == set(range(low, high + 1))


def test_mask_batch_of_no_inputs_is_no_outputs_and_draws_nothing():
    # A one-sentence corpus: its only chunk needs a partner, so the document has no pair.
    for whole_word in (False, True):
        rng = Scripted()
        assert mask_batch([], [], _config(0.15, whole_word=whole_word), rng) == []
        rng.assert_used_up()
    # …and the real stream is where it was: the next draw is the same as a fresh stream's.
    rng = document_stream(12345, "t/solo", 0, 128)
    assert mask_batch([], [], _config(0.15), rng) == []
    assert rng.uniforms(2).tolist() == document_stream(12345, "t/solo", 0, 128).uniforms(2).tolist()
