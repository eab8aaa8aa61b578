"""MinHash signatures of word n-grams (rensa's RMinHash) and their estimated similarity.

A document's shingles are its word n-grams (`ngram` consecutive normalised words, joined by
one space); a document with fewer words than `ngram` has one shingle, all its words. Its
signature is rensa's `RMinHash(num_perm, seed)` over those shingles, as `num_perm` unsigned
32-bit little-endian integers: bytes, so that Beam carries it without pickling. rensa hashes
each shingle with a fixed hash and draws its permutations from `seed` alone, so a
signature is the same in every process and on every machine (tests/test_dedup.py).

The estimated Jaccard similarity of two signatures is the share of positions at which they
hold the same value, as rensa's `jaccard` computes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rensa import RMinHash

SIGNATURE_DTYPE = np.dtype("<u4")


def shingles(words: Sequence[str], ngram: int) -> list[str]:
    """The document's word n-grams, in order (repeats included: MinHash sees a set)."""
    if len(words) <= ngram:
        return [" ".join(words)] if words else []
    return list(map(" ".join, zip(*(words[start:] for start in range(ngram)), strict=False)))


def signature(words: Sequence[str], ngram: int, num_perm: int, seed: int) -> bytes | None:
    """The MinHash signature of the document's shingles; None for a document without words
    (an empty set has no meaningful signature: such documents are only compared exactly)."""
    grams = shingles(words, ngram)
    if not grams:
        return None
    minhash = RMinHash(num_perm, seed)
    minhash.update(grams)
    return np.asarray(minhash.digest(), dtype=SIGNATURE_DTYPE).tobytes()


def similarity(first: bytes, second: bytes) -> float:
    """Estimated Jaccard similarity of two signatures of the same `num_perm` and seed."""
    a = np.frombuffer(first, dtype=SIGNATURE_DTYPE)
    b = np.frombuffer(second, dtype=SIGNATURE_DTYPE)
    if a.shape != b.shape:
        raise ValueError(f"signatures of {a.size} and {b.size} values cannot be compared")
    return float(np.count_nonzero(a == b)) / a.size
