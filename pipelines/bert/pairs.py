"""Sentence pairs for next-sentence prediction: google-research/bert's algorithm, Beam-free.

`create_pairs` is `create_instances_from_document` from google-research/bert's
`create_pretraining_data.py`, step by step, on token ids:

1. The target length is `max_seq_length - 3` ([CLS], [SEP], [SEP]), or, with probability
   `short_seq_prob`, a random length in [2, max_seq_length - 3] (drawn once per document per
   pass), so the model also sees short inputs.
2. Sentences are gathered into a chunk until it reaches the target length or the document
   ends.
3. A ends at a random sentence boundary of the chunk (after its first sentence if the chunk
   has one sentence).
4. With probability 0.5, and always when the chunk has one sentence, B is "random next": it
   comes from another document, starting at a random sentence, until it fills the target;
   the chunk's sentences after A go back to the document (they start the next chunk).
   Otherwise B is the rest of the chunk.
5. The pair is trimmed to fit: one token at a time from the longer side, from its front or
   back at random.

Deliberate differences (each recorded in the shards manifest, see DEVIATIONS):
- The partner for a random next is drawn from `partners`, which never holds the document
  itself. Google draws any document of the whole corpus held in memory, retrying 10 times to
  avoid the same one and then giving up (so a small corpus gets same-document "NotNext"
  pairs); NVIDIA's and HF's scripts draw from the same file or shard only. The caller passes
  a random group of documents from the whole corpus (see pipelines/examples/plan.py).
- Draws come from a RandomStream seeded per (seed, document, pass, length), not one
  generator walked across the corpus, so output does not depend on the order of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from pipelines.bert.draws import RandomStream

# Pairs are made from sentence lengths alone and come out as token ranges: no token is
# touched in Python, and a document is its token ids in one array plus its sentence
# lengths (the spill record's layout).
SentenceLengths = Sequence[int]


@dataclass(slots=True)
class SentencePair:
    a_start: int  # A = the document's tokens [a_start, a_end)
    a_end: int
    b_start: int  # B = tokens [b_start, b_end) of the partner, or of the document itself
    b_end: int
    partner: int  # index into `partners` of B's document; -1 when B follows A
    # The document's own tokens step 5 trimmed off to fit (A's, and B's when B follows A):
    # text of this pass that reaches no example. A random next's B is another document's,
    # whose text makes its own examples.
    truncated: int = 0

    @property
    def is_random_next(self) -> bool:
        return self.partner >= 0


def target_length(max_num_tokens: int, short_seq_prob: float, rng: RandomStream) -> int:
    """Step 1: the length this document's chunks aim for in this pass."""
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def truncation_cuts(
    len_a: int, len_b: int, max_num_tokens: int, rng: RandomStream
) -> tuple[int, int, int, int]:
    """Step 5: how many tokens to drop from (A's front, A's back, B's front, B's back).

    Google's loop takes one token at a time from the longer side (B on a tie), from the front
    or the back at random ("to add more randomness and avoid biases"). Which side loses each
    token depends on the lengths alone: first the longer side down to the other's length,
    then B, A, B, A, … So the front/back draws are taken in one block, with the same result
    as the loop (tested against it).
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0, 0, 0
    lead = min(excess, abs(len_a - len_b))
    back = rng.uniforms(excess) >= 0.5  # token k goes from the back (else the front)
    # Tokens [0, lead) come from the longer side; then B takes the even ones, A the odd.
    lead_back = int(np.count_nonzero(back[:lead]))
    b_taken, a_taken = (excess - lead + 1) // 2, (excess - lead) // 2
    b_back = int(np.count_nonzero(back[lead::2]))
    a_back = int(np.count_nonzero(back[lead + 1 :: 2]))
    if len_a > len_b:
        a_taken, a_back = a_taken + lead, a_back + lead_back
    else:
        b_taken, b_back = b_taken + lead, b_back + lead_back
    return a_taken - a_back, a_back, b_taken - b_back, b_back


def create_pairs(
    document: SentenceLengths,
    partners: Sequence[SentenceLengths],
    max_seq_length: int,
    short_seq_prob: float,
    rng: RandomStream,
) -> list[SentencePair]:
    """All sentence pairs one pass makes from `document` (steps 1 to 5 above).

    `document` and each of `partners` are sentence lengths in tokens (each ≥ 1); pairs come
    back as token ranges. `partners` are the candidate documents for a random next; with
    none, a chunk that needs one makes no pair (the caller counts it): that happens only
    for a corpus, or held-out split, of a single document.
    """
    max_num_tokens = max_seq_length - 3
    target = target_length(max_num_tokens, short_seq_prob, rng)
    starts = [0, *accumulate(document)]  # token offset of each sentence, and the end
    pairs: list[SentencePair] = []
    first = 0  # the chunk is sentences first … i
    i = 0
    while i < len(document):
        if i == len(document) - 1 or starts[i + 1] - starts[first] >= target:
            size = i - first + 1
            a_end = rng.randint(1, size - 1) if size >= 2 else 1
            a_start, a_stop = starts[first], starts[first + a_end]
            partner = -1
            b_start = b_stop = 0
            if size == 1 or rng.random() < 0.5:
                if partners:
                    partner = rng.randint(0, len(partners) - 1)
                    other = partners[partner]
                    target_b = target - (a_stop - a_start)
                    j = rng.randint(0, len(other) - 1)
                    b_start = sum(other[:j])
                    b_stop = b_start
                    for length in other[j:]:
                        b_stop += length
                        if b_stop - b_start >= target_b:
                            break
                # The chunk's sentences after A were not used: they start the next chunk.
                i = first + a_end - 1
            else:
                b_start, b_stop = a_stop, starts[i + 1]
            if b_stop > b_start:
                cut = truncation_cuts(a_stop - a_start, b_stop - b_start, max_num_tokens, rng)
                pairs.append(
                    SentencePair(
                        a_start + cut[0],
                        a_stop - cut[1],
                        b_start + cut[2],
                        b_stop - cut[3],
                        partner,
                        cut[0] + cut[1] + (cut[2] + cut[3] if partner < 0 else 0),
                    )
                )
            first = i + 1
        i += 1
    return pairs


def pair_input_ids(
    pair: SentencePair, document: np.ndarray, partner: np.ndarray | None, cls_id: int, sep_id: int
) -> tuple[np.ndarray, int]:
    """`[CLS] A [SEP] B [SEP]` (int64) and the length of segment 0 (`[CLS] A [SEP]`).

    `document` and `partner` are token id arrays; `partner` is B's document for a random next.
    """
    a = document[pair.a_start : pair.a_end]
    b = (partner if pair.is_random_next else document)[pair.b_start : pair.b_end]
    ids = np.empty(len(a) + len(b) + 3, dtype=np.int64)
    ids[0] = cls_id
    ids[1 : 1 + len(a)] = a
    ids[1 + len(a)] = sep_id
    ids[2 + len(a) : -1] = b
    ids[-1] = sep_id
    return ids, len(a) + 2


def pairs_input_ids(
    pairs: Sequence[SentencePair],
    document: np.ndarray,
    partners: Sequence[np.ndarray],
    cls_id: int,
    sep_id: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pair_input_ids` of every pair at once: their `[CLS] A [SEP] B [SEP]` laid end to end
    (int64), each one's length, and each one's segment-0 length (`[CLS] A [SEP]`).

    `partners[pair.partner]` is B's document for a random next. One concatenation of every
    pair's five runs (views), instead of an array per pair.
    """
    cls, sep = np.array([cls_id], dtype=np.int64), np.array([sep_id], dtype=np.int64)
    runs: list[np.ndarray] = []
    a_lengths = np.empty(len(pairs), dtype=np.int64)
    lengths = np.empty(len(pairs), dtype=np.int64)
    for index, pair in enumerate(pairs):
        source = partners[pair.partner] if pair.partner >= 0 else document
        runs += (
            cls,
            document[pair.a_start : pair.a_end],
            sep,
            source[pair.b_start : pair.b_end],
            sep,
        )
        a_lengths[index] = pair.a_end - pair.a_start + 2
        lengths[index] = pair.a_end - pair.a_start + pair.b_end - pair.b_start + 3
    return np.concatenate(runs, dtype=np.int64), lengths, a_lengths
