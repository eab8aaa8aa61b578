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
  a random group of documents from the whole corpus (see pipelines/examples.py).
- Draws come from a RandomStream seeded per (seed, document, pass, length), not one
  generator walked across the corpus, so output does not depend on the order of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.draws import RandomStream

# A document is its sentences, each a list of token ids.
Document = Sequence[Sequence[int]]


@dataclass(slots=True)
class SentencePair:
    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool
    partner: int  # index into `partners` of B's document; -1 when B follows A


def target_length(max_num_tokens: int, short_seq_prob: float, rng: RandomStream) -> int:
    """Step 1: the length this document's chunks aim for in this pass."""
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def truncate_pair(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: RandomStream
) -> None:
    """Step 5, in place: drop a token from the longer side's front or back until it fits.

    Google's loop takes one token at a time from the longer side (B on a tie), from the front
    or the back at random ("to add more randomness and avoid biases"). Which side loses each
    token depends on the lengths alone: first the longer side down to the other's length,
    then B, A, B, A, … So the front/back draws are taken in one block and the cuts made in
    two slices, with the same result as the loop.
    """
    excess = len(tokens_a) + len(tokens_b) - max_num_tokens
    if excess <= 0:
        return
    draws = rng.uniforms(excess).tolist()
    lead = min(excess, abs(len(tokens_a) - len(tokens_b)))
    a_longer = len(tokens_a) > len(tokens_b)
    cuts = {True: [0, 0], False: [0, 0]}  # side is A → [from front, from back]
    for k, draw in enumerate(draws):
        from_a = a_longer if k < lead else (k - lead) % 2 == 1
        cuts[from_a][0 if draw < 0.5 else 1] += 1
    for tokens, (front, back) in ((tokens_a, cuts[True]), (tokens_b, cuts[False])):
        tokens[:] = tokens[front : len(tokens) - back]


def create_pairs(
    document: Document,
    partners: Sequence[Document],
    max_seq_length: int,
    short_seq_prob: float,
    rng: RandomStream,
) -> list[SentencePair]:
    """All sentence pairs one pass makes from `document` (steps 1 to 5 above).

    `partners` are the candidate documents for a random next; with none, a chunk that needs
    one makes no pair (the caller counts it): that happens only for a corpus, or held-out
    split, of a single document.
    """
    max_num_tokens = max_seq_length - 3
    target = target_length(max_num_tokens, short_seq_prob, rng)
    pairs: list[SentencePair] = []
    chunk: list[Sequence[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        sentence = document[i]
        chunk.append(sentence)
        chunk_length += len(sentence)
        if i == len(document) - 1 or chunk_length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [token for sentence in chunk[:a_end] for token in sentence]
            tokens_b: list[int] = []
            partner = -1
            if len(chunk) == 1 or rng.random() < 0.5:
                if partners:
                    partner = rng.randint(0, len(partners) - 1)
                    other = partners[partner]
                    target_b = target - len(tokens_a)
                    for j in range(rng.randint(0, len(other) - 1), len(other)):
                        tokens_b.extend(other[j])
                        if len(tokens_b) >= target_b:
                            break
                # The chunk's sentences after A were not used: they start the next chunk.
                i -= len(chunk) - a_end
            else:
                tokens_b = [token for sentence in chunk[a_end:] for token in sentence]
            if tokens_b:
                truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                pairs.append(SentencePair(tokens_a, tokens_b, partner >= 0, partner))
            chunk = []
            chunk_length = 0
        i += 1
    return pairs


def pair_input_ids(pair: SentencePair, cls_id: int, sep_id: int) -> tuple[list[int], int]:
    """`[CLS] A [SEP] B [SEP]` and the length of segment 0 (`[CLS] A [SEP]`)."""
    return [cls_id, *pair.tokens_a, sep_id, *pair.tokens_b, sep_id], len(pair.tokens_a) + 2
