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

from pipelines.bert.draws import RandomStream

MASK_PROB = 0.8
KEEP_PROB_OF_REST = 0.5  # of the remaining 20 %: half kept, half random
SPECIAL_KEY = 2.0  # [CLS]/[SEP]'s key: above every uniform, chosen only if nothing else is left
PAD_KEY = 3.0  # past an input's end (mask_batch's rows): above even SPECIAL_KEY


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
    if config.is_continuation is not None:
        ids = np.asarray(input_ids, dtype=np.int64)
        candidates = np.ones(len(ids), dtype=bool)
        candidates[list(special_positions)] = False
        return _mask_whole_words(ids, candidates, num_to_predict(len(ids), config), config, rng)
    (masked,) = mask_batch([input_ids], [special_positions], config, rng)
    return masked


def mask_batch(
    inputs: Sequence[Sequence[int]],
    special_positions: Sequence[Sequence[int]],
    config: MaskingConfig,
    rng: RandomStream,
) -> list[MaskedInput]:
    """`mask_tokens` for many inputs at once (whole-word masking goes one input at a time).

    One document's examples are masked together with a handful of numpy calls, not a few
    per example (`mask_flat`).

    No inputs (a document whose chunks all needed a partner it did not have) are no outputs
    and no draws: numpy cannot concatenate an empty list, and a draw of nothing would still
    be a call that a scripted stream has to expect.
    """
    if not inputs:
        return []
    if config.is_continuation is not None:
        return [
            mask_tokens(i, s, config, rng) for i, s in zip(inputs, special_positions, strict=True)
        ]
    lengths = np.fromiter((len(i) for i in inputs), dtype=np.int64, count=len(inputs))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    flat = np.concatenate([np.asarray(i, dtype=np.int64) for i in inputs])
    specials = _flat_specials(starts, special_positions)
    special_counts = np.fromiter(map(len, special_positions), np.int64, len(inputs))
    batch = mask_flat(flat, lengths, specials, special_counts, config, rng)
    ends = np.cumsum(batch.counts)
    bounds = zip(
        starts.tolist(),
        lengths.tolist(),
        (ends - batch.counts).tolist(),
        ends.tolist(),
        strict=True,
    )
    return [
        MaskedInput(
            batch.input_ids[start : start + length],
            batch.positions[first:last],
            batch.labels[first:last],
        )
        for start, length, first, last in bounds
    ]


@dataclass(slots=True)
class MaskedBatch:
    """Many inputs masked at once, laid end to end (`mask_flat`)."""

    input_ids: np.ndarray  # int64, every input's ids with masks applied, one after another
    starts: np.ndarray  # where each input starts in input_ids
    positions: np.ndarray  # int64, each input's predictions, input after input, ascending
    labels: np.ndarray  # int64, original ids at those positions
    counts: np.ndarray  # predictions per input


def mask_flat(
    flat: np.ndarray,
    lengths: np.ndarray,
    specials: np.ndarray,
    special_counts: np.ndarray,
    config: MaskingConfig,
    rng: RandomStream,
) -> MaskedBatch:
    """Static masks of inputs laid end to end: `flat` (int64) holds them one after another,
    `lengths` their lengths, `specials` their [CLS]/[SEP] positions in `flat` and
    `special_counts` how many each has. The draws and the result are mask_batch's, without
    an array per input (not for whole-word masking).

    Each position gets a uniform key ([CLS]/[SEP] an impossible one) and an input's
    predictions are its positions with the smallest keys, which is a uniformly random
    choice, as Google's shuffle-then-take-the-first is.
    """
    starts = np.cumsum(lengths) - lengths
    keys = rng.uniforms(len(flat))
    keys[specials] = SPECIAL_KEY
    candidates = lengths - special_counts
    # Python's round (half to even), as Google's; np.round rounds half to even too.
    counts = np.minimum(
        np.minimum(
            config.max_predictions, np.maximum(1, np.round(lengths * config.masked_lm_prob))
        ),
        candidates,
    ).astype(np.int64)
    chosen = _smallest_keys(keys, lengths, starts, counts)
    masked, randomised = _replacements(rng.uniforms(len(chosen)), rng, config)
    labels = flat[chosen]
    output = flat.copy()
    output[chosen[masked]] = config.mask_id
    draws = rng.uniforms(int(randomised.sum())) * len(config.replaceable_ids)
    output[chosen[randomised]] = config.replaceable_ids[draws.astype(np.int64)]
    positions = chosen - np.repeat(starts, counts)
    return MaskedBatch(output, starts, positions, labels, counts)


def _flat_specials(starts: np.ndarray, special_positions: Sequence[Sequence[int]]) -> np.ndarray:
    """Every input's special positions, as positions in the inputs laid end to end."""
    counts = np.fromiter(map(len, special_positions), np.int64, len(special_positions))
    if len(counts) and (counts == counts[0]).all():  # pairs: (0, [SEP] after A, last) each
        table = np.array(special_positions, dtype=np.int64).reshape(len(counts), int(counts[0]))
        return (starts[:, None] + table).ravel()
    offsets = np.repeat(starts, counts)
    return offsets + np.fromiter(
        (p for s in special_positions for p in s), np.int64, int(counts.sum())
    )


def _smallest_keys(
    keys: np.ndarray, lengths: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Positions (in the inputs laid end to end, ascending) of each input's `counts[i]`
    smallest keys, ties to the earlier position: what a stable sort by (input, key) takes.

    The keys go into one row per input, padded with PAD_KEY (never taken: a count is at most
    the input's candidates), and each row is sorted on its own: its counts[i]-th smallest key
    is the row's threshold; the keys below it are taken, and of those equal to it the first
    ones by position, as many as are missing.
    """
    rows = len(lengths)
    owner = np.repeat(np.arange(rows), lengths)
    column = np.arange(len(keys)) - starts[owner]
    grid = np.full((rows, int(lengths.max())), PAD_KEY)
    grid[owner, column] = keys
    # Only the row's `most` smallest keys need an order: partitioned to the front, then
    # sorted (at 128 tokens, 20 of 128 keys a row), not the whole row.
    most = int(counts.max())
    if most:
        smallest = np.partition(grid, most - 1, axis=1)[:, :most]
        smallest.sort(axis=1)
        threshold = np.where(counts > 0, smallest[np.arange(rows), np.maximum(counts - 1, 0)], -1.0)
    else:
        threshold = np.full(rows, -1.0)
    below = grid < threshold[:, None]
    tied = grid == threshold[:, None]
    missing = counts - np.count_nonzero(below, axis=1)
    take = below | (tied & (np.cumsum(tied, axis=1) <= missing[:, None]))
    row, col = np.nonzero(take)  # row by row, ascending within a row
    return starts[row] + col


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
