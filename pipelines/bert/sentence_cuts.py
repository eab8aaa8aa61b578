"""A sentence of any length in bounded memory: cut it into pieces before it is tokenized.

A tokenizer holds ~90 bytes per character of the text it is given at once (its normalized
string, offsets and encoding; docs/bad-input.md has the figures), and a sentence
splitter can hand over a whole book as one sentence when the book has no full stop. So a
sentence longer than `MAX_SENTENCE_CHARS` characters is cut into pieces of at most that many,
and each piece is a sentence from then on (a chunk, a segment A or B, as any sentence).

The cut falls after the last space, tab or line break of each window: BERT's
pre-tokenizer splits words there anyway, so the pieces' tokens are exactly the sentence's
tokens, cut between two words. A window of `MAX_SENTENCE_CHARS` characters without one is
cut at its end; the word cut there (a run far beyond WordPiece's 100 characters, unless
punctuation splits it) may tokenize differently on either side.

Google's script tokenizes such a sentence whole and, as its chunk holds one sentence, makes
one example of it per pass, truncated to fit; its pieces make one example each. No real
sentence comes near the bound: the sample's longest is 1,831 characters.
"""

from __future__ import annotations

MAX_SENTENCE_CHARS = 16_384
_SPACES = (" ", "\t", "\n", "\r")  # whitespace to BERT's pre-tokenizer and to its clean-up


def cut_sentence(sentence: str, max_chars: int = MAX_SENTENCE_CHARS) -> list[str]:
    """`sentence` in pieces of at most `max_chars` characters, joined again by `"".join`.

    Each piece ends with the last space, tab or line break of its window (kept with it), or
    at `max_chars` characters when the window has none; a sentence that fits is one piece.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars {max_chars}: must be at least 1")
    pieces = []
    start = 0
    while len(sentence) - start > max_chars:
        end = start + max_chars
        space = max(sentence.rfind(s, start + 1, end) for s in _SPACES)
        cut = space + 1 if space > start else end
        pieces.append(sentence[start:cut])
        start = cut
    pieces.append(sentence[start:])
    return pieces
