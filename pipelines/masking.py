"""Static masked-LM predictions: google-research/bert's `create_masked_lm_predictions`.

1. Candidates are every position but [CLS] and [SEP]; with whole-word masking a candidate is
   a word: a piece and the `##` pieces that follow it.
2. The number to predict is `min(max_predictions, max(1, round(len(input_ids) * prob)))`
   (the length counts [CLS] and [SEP], as Google's does).
3. Candidates are visited in a random order, skipping a word that would overshoot the number.
4. Each chosen position becomes [MASK] with probability 0.8, stays unchanged with 0.1, and
   becomes a random token with 0.1; its original id is the label.

Deliberate differences (recorded in the shards manifest):
- With whole-word masking the 80/10/10 choice is made once per word and applied to all its
  pieces; Google draws per piece, so a word can come out half masked, half random
  (google-research/bert#910).
- A random replacement is drawn from `replaceable_ids`: never [PAD], [CLS], [SEP], [MASK],
  [UNK] or an [unusedN] slot (Google draws from the whole vocabulary).
- Without whole-word masking, the draws are vectorised (numpy), so the values differ from
  Google's for the same seed while following the same distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipelines.draws import RandomStream

MASK_PROB = 0.8
KEEP_PROB_OF_REST = 0.5  # of the remaining 20 %: half kept, half random


@dataclass(frozen=True, slots=True)
class MaskingConfig:
    masked_lm_prob: float
    max_predictions: int
    mask_id: int
    replaceable_ids: np.ndarray  # ids a random replacement may take
    is_continuation: np.ndarray | None = None  # per id: "##" piece; set for whole-word masking


@dataclass(slots=True)
class MaskedInput:
    input_ids: np.ndarray  # with masks applied
    positions: np.ndarray  # ascending
    labels: np.ndarray  # original ids at `positions`


def num_to_predict(length: int, config: MaskingConfig) -> int:
    return min(config.max_predictions, max(1, round(length * config.masked_lm_prob)))


def _replacements(
    choice_uniforms: np.ndarray, rng: RandomStream, config: MaskingConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Per chosen word: which are masked and which random (the rest are kept)."""
    masked = choice_uniforms < MASK_PROB
    rest = rng.uniforms(len(choice_uniforms))
    randomised = ~masked & (rest >= KEEP_PROB_OF_REST)
    return masked, randomised


def mask_tokens(
    input_ids: Sequence[int],
    special_positions: Sequence[int],
    config: MaskingConfig,
    rng: RandomStream,
) -> MaskedInput:
    """Choose and apply the masked-LM predictions of one input (steps 1 to 4 above).

    `special_positions` are the [CLS] and [SEP] positions (never predicted).
    """
    ids = np.asarray(input_ids, dtype=np.int64)
    count = num_to_predict(len(ids), config)
    candidates = np.ones(len(ids), dtype=bool)
    candidates[list(special_positions)] = False
    if config.is_continuation is not None:
        return _mask_whole_words(ids, candidates, count, config, rng)
    positions = np.flatnonzero(candidates)
    chosen = np.sort(positions[rng.permutation(len(positions))[:count]])
    masked, randomised = _replacements(rng.uniforms(len(chosen)), rng, config)
    labels = ids[chosen]
    output = ids.copy()
    output[chosen[masked]] = config.mask_id
    random_ids = config.replaceable_ids[
        (rng.uniforms(int(randomised.sum())) * len(config.replaceable_ids)).astype(np.int64)
    ]
    output[chosen[randomised]] = random_ids
    return MaskedInput(output, chosen, labels)


def word_spans(
    ids: np.ndarray, candidates: np.ndarray, is_continuation: np.ndarray
) -> list[list[int]]:
    """Whole-word candidates: a piece and the `##` pieces right after it (Google's rule)."""
    spans: list[list[int]] = []
    continuation = is_continuation[ids]
    for position in np.flatnonzero(candidates).tolist():
        if spans and continuation[position] and spans[-1][-1] == position - 1:
            spans[-1].append(position)
        else:
            spans.append([position])
    return spans


def _mask_whole_words(
    ids: np.ndarray, candidates: np.ndarray, count: int, config: MaskingConfig, rng: RandomStream
) -> MaskedInput:
    spans = word_spans(ids, candidates, config.is_continuation)
    chosen_spans: list[list[int]] = []
    chosen = 0
    for index in rng.permutation(len(spans)).tolist():
        if chosen >= count:
            break
        span = spans[index]
        if chosen + len(span) > count:
            continue
        chosen_spans.append(span)
        chosen += len(span)
    masked, randomised = _replacements(rng.uniforms(len(chosen_spans)), rng, config)
    output = ids.copy()
    for span, is_masked, is_random in zip(chosen_spans, masked, randomised, strict=True):
        if is_masked:
            output[span] = config.mask_id
        elif is_random:
            draws = rng.uniforms(len(span)) * len(config.replaceable_ids)
            output[span] = config.replaceable_ids[draws.astype(np.int64)]
    positions = np.array(sorted(p for span in chosen_spans for p in span), dtype=np.int64)
    return MaskedInput(output, positions, ids[positions])
