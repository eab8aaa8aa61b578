"""Tokenizing text in bulk with each distinct word tokenized once.

A BERT tokenizer's cost is per character, and most characters of a corpus belong to words
it has already seen (docs/benchmarks.md counts the sample's). So `encode_words_once` cuts a
window of texts at their spaces, keeps one copy of each distinct piece, tokenizes only
those (joined by spaces into a few long strings, since the tokenizer's cost per call and
per input outweighs its cost per character for short inputs), finds each piece's tokens by
their character offsets, and lays every text's tokens out again from its pieces.

This is exact, not an approximation, for a BERT tokenizer (`splits_at_spaces` checks the
tokenizer is one): its normalizer works character by character (clean-up, CJK spacing,
accents, lower case; NFD never reorders across a space), a space always ends a word for its
pre-tokenizer, and WordPiece works one word at a time. So a text's tokens are its
space-separated pieces' tokens, one after another: `tests/test_words_once.py` checks it
against the plain call on every sentence of the sample. Any other tokenizer goes through
`encode_in_calls`, the plain calls, unchanged.

Memory is bounded by the window: the pieces of at most `window_chars` characters of text
(a longer text is a window alone; the example stage cuts sentences to 16 k characters
first), its distinct pieces joined (no more text than the window's), and tokenizer calls
of at most `call_chars` characters of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

import numpy as np

# Distinct pieces go to the tokenizer joined into strings of about this many characters:
# long enough that the cost per input vanishes, short enough that one call's strings keep
# every tokenizer thread busy.
JOINED_CHARS = 1 << 16


def splits_at_spaces(tokenizer: Any) -> bool:
    """Whether `tokenizer`'s tokens of a text are always its space-separated pieces' tokens,
    one after another: a BERT normalizer (or none), BERT's pre-tokenizer, WordPiece, and no
    added token that holds a space or takes the spaces around it."""
    config = json.loads(tokenizer.to_str())
    normalizer = config.get("normalizer")
    pre_tokenizer = config.get("pre_tokenizer") or {}
    if normalizer is not None and normalizer.get("type") != "BertNormalizer":
        return False
    if pre_tokenizer.get("type") != "BertPreTokenizer":
        return False
    if (config.get("model") or {}).get("type") != "WordPiece":
        return False
    return all(
        not any(c.isspace() for c in added["content"])
        and not (added.get("lstrip") or added.get("rstrip") or added.get("single_word"))
        for added in config.get("added_tokens") or []
    )


def windows(
    texts: Sequence[str], max_chars: int, max_texts: int | None = None, joined_by: int = 0
) -> Iterator[slice]:
    """`texts` cut into runs of at most `max_chars` characters and `max_texts` texts, in
    order, counting `joined_by` characters between two texts of a run (the separator they
    will be joined with); a text longer than `max_chars` is a run alone."""
    start = 0
    while start < len(texts):
        end, chars = start + 1, len(texts[start])
        while (
            end < len(texts)
            and (max_texts is None or end - start < max_texts)
            and chars + joined_by + len(texts[end]) <= max_chars
        ):
            chars += joined_by + len(texts[end])
            end += 1
        yield slice(start, end)
        start = end


def encode_in_calls(
    tokenizer: Any, texts: Sequence[str], max_texts: int, max_chars: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every text's token ids (uint32, one after another) and each text's count (uint32),
    from tokenizer calls of at most `max_texts` texts and `max_chars` characters (a longer
    text goes alone), each call's encodings let go before the next: the memory of one call
    is bounded, whatever the number or length of the texts. Any tokenizer."""
    results = []
    for window in windows(texts, max_chars, max_texts):
        encoded = tokenizer.encode_batch_fast(texts[window], add_special_tokens=False)
        ids = [e.ids for e in encoded]
        del encoded
        lengths = np.fromiter(map(len, ids), dtype=np.uint32, count=len(ids))
        tokens = np.fromiter(chain.from_iterable(ids), np.uint32, int(lengths.sum()))
        results.append((tokens, lengths))
    return _concatenated(results)


def encode_words_once(
    tokenizer: Any, texts: Sequence[str], window_chars: int, call_chars: int
) -> tuple[np.ndarray, np.ndarray]:
    """`encode_in_calls`'s result, with each distinct space-separated piece of a window of
    at most `window_chars` characters tokenized once (in calls of at most `call_chars`
    characters). Only for a tokenizer `splits_at_spaces` accepts."""
    return _concatenated(
        [_encode_window(tokenizer, texts[w], call_chars) for w in windows(texts, window_chars)]
    )


def _concatenated(results: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not results:
        return np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.uint32)
    return (
        np.concatenate([tokens for tokens, _ in results]),
        np.concatenate([lengths for _, lengths in results]),
    )


def _encode_window(
    tokenizer: Any, texts: Sequence[str], call_chars: int
) -> tuple[np.ndarray, np.ndarray]:
    pieces_per_text = np.empty(len(texts), dtype=np.int64)
    pieces: list[str] = []
    for index, text in enumerate(texts):
        split = text.split(" ")
        pieces += split
        pieces_per_text[index] = len(split)
    distinct: dict[str, int] = {}
    codes = np.fromiter(
        (distinct.setdefault(piece, len(distinct)) for piece in pieces), np.int64, len(pieces)
    )
    del pieces
    tokens, counts = _encode_distinct(tokenizer, list(distinct), call_chars)
    # Each piece's tokens are the run [first, first + count) of `tokens`: gather them all.
    piece_counts = counts[codes]
    piece_firsts = (np.cumsum(counts) - counts)[codes]
    out_starts = np.cumsum(piece_counts) - piece_counts
    gather = np.arange(int(piece_counts.sum()), dtype=np.int64)
    gather += np.repeat(piece_firsts - out_starts, piece_counts)
    text_firsts = np.cumsum(pieces_per_text) - pieces_per_text  # every text has a piece
    lengths = np.add.reduceat(piece_counts, text_firsts)
    return tokens[gather], lengths.astype(np.uint32)


def _encode_distinct(
    tokenizer: Any, pieces: list[str], call_chars: int
) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of each piece (uint32, one piece after another) and each piece's count,
    from tokenizer calls of at most `call_chars` characters on the pieces joined by spaces
    into strings of at most JOINED_CHARS (a longer piece is a string alone)."""
    runs = list(windows(pieces, min(JOINED_CHARS, call_chars), joined_by=1))
    joined = [" ".join(pieces[run]) for run in runs]
    results = []
    for call in windows(joined, call_chars):
        encoded = tokenizer.encode_batch(joined[call], add_special_tokens=False)
        for encoding, run in zip(encoded, runs[call], strict=True):
            lengths = np.fromiter(map(len, pieces[run]), np.int64, run.stop - run.start) + 1
            piece_firsts = np.cumsum(lengths) - lengths
            ids = encoding.ids
            token_firsts = np.fromiter(
                chain.from_iterable(encoding.offsets), np.int64, 2 * len(ids)
            )[::2]
            owner = np.searchsorted(piece_firsts, token_firsts, side="right") - 1
            counts = np.bincount(owner, minlength=run.stop - run.start)
            results.append((np.array(ids, dtype=np.uint32), counts))
        del encoded
    return _concatenated(results)
