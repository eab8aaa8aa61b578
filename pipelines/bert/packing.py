"""Full-sentence sequences: RoBERTa's FULL-SENTENCES packing, Beam-free.

RoBERTa (Liu et al. 2019, section 4.2): "Each input is packed with full sentences sampled
contiguously from one or more documents, such that the total length is at most 512 tokens.
Inputs may cross document boundaries. When we reach the end of one document, we begin
sampling sentences from the next document and add an extra separator token between
documents." There is no next-sentence label. Here:

1. The documents, in the order given (the caller passes a partner group's documents in id
   order), are one stream of tokens.
2. A sequence is `[CLS] piece [SEP] piece [SEP] … piece [SEP]`: each piece a contiguous run
   of one document's tokens, consecutive pieces from consecutive documents, a [SEP] between
   two documents and one at the end. Every sequence but the stream's last holds exactly
   `max_seq_length` tokens, unless a document ends one token before the end: there is no
   room for a separator and a token of the next document, so that sequence closes there,
   one token short.
3. A sentence that does not fit is cut at the end of the sequence and continues at the
   start of the next; a sentence longer than a sequence is cut into as many pieces as it
   needs. The cut falls between two tokens, which may be inside a word.

Deliberate difference (recorded in the shards manifest): RoBERTa packs whole sentences and
pads the room a sentence that does not fit leaves; here the sentence is cut and carried to
the next sequence, so the only padding is at the end of a stream and at the rare one-token
gap above. Sentence lengths are taken, as `pairs.create_pairs` takes them, but only their
sums decide the cuts: a sequence starts wherever the previous one ended.

No random draw is made: the same documents in the same order give the same sequences.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from pipelines.bert.pairs import SentenceLengths

SPECIAL_TOKENS = 2  # [CLS] and the closing [SEP]; each document boundary inside adds one


class Piece(NamedTuple):
    """Tokens [start, end) of the document at `document` (an index into the stream)."""

    document: int
    start: int
    end: int


def pack_sequences(
    documents: Sequence[SentenceLengths], max_seq_length: int
) -> Iterator[list[Piece]]:
    """The pieces of each full-sentence sequence of `documents` (steps 1 to 3 above), one
    sequence at a time, so that a stream of any length is packed in bounded memory.

    A document of no tokens adds nothing (not even a separator). `max_seq_length` must leave
    room for a token: at least 3.
    """
    if max_seq_length < SPECIAL_TOKENS + 1:
        raise ValueError(f"max_seq_length {max_seq_length}: must be at least 3")
    totals = [int(sum(lengths)) for lengths in documents]
    document = _next_with_tokens(totals, 0)
    offset = 0
    while document < len(totals):
        room = max_seq_length - SPECIAL_TOKENS
        pieces: list[Piece] = []
        while document < len(totals):
            if pieces:
                if room < 2:  # a separator and one token of the next document
                    break
                room -= 1
            take = min(room, totals[document] - offset)
            pieces.append(Piece(document, offset, offset + take))
            offset += take
            room -= take
            if offset == totals[document]:
                document, offset = _next_with_tokens(totals, document + 1), 0
            if not room:
                break
        yield pieces


def _next_with_tokens(totals: list[int], document: int) -> int:
    while document < len(totals) and not totals[document]:
        document += 1
    return document


def sequence_length(pieces: Sequence[Piece]) -> int:
    """Tokens of the sequence the pieces make: theirs, [CLS], and a [SEP] after each."""
    return 1 + sum(p.end - p.start for p in pieces) + len(pieces)


def packed_input_ids(
    pieces: Sequence[Piece], documents: Sequence[np.ndarray], cls_id: int, sep_id: int
) -> tuple[np.ndarray, list[int]]:
    """`[CLS] piece [SEP] … piece [SEP]` (int64) and the positions of [CLS] and every [SEP]
    (never predicted). `documents` are the token id arrays the pieces index."""
    ids = np.empty(sequence_length(pieces), dtype=np.int64)
    ids[0] = cls_id
    special = [0]
    at = 1
    for piece in pieces:
        size = piece.end - piece.start
        ids[at : at + size] = documents[piece.document][piece.start : piece.end]
        at += size
        ids[at] = sep_id
        special.append(at)
        at += 1
    return ids, special
