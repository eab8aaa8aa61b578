"""What two documents must share to be the same text: their normalised words.

A document's sentences are joined with spaces, put in Unicode NFKC form (compatibility
characters such as ligatures, full-width letters and non-breaking spaces become their plain
forms) and case-folded; every character that is neither a letter, a digit, an underscore
nor whitespace (punctuation, quotes, dashes, symbols) is dropped, and the text is split on
whitespace. So the same book as another edition (other line wrapping, straight or curly
quotes, `--` or an em dash, another case in its headings) gives the same words, and
"don't" and "don’t" are both `dont`.

The exact key is a 128-bit BLAKE2b hash of those words joined by single spaces; near
duplicates are found on word n-grams of the same words (minhash.py).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence

_DROPPED = re.compile(r"[^\w\s]+")
EXACT_KEY_BYTES = 16


def normalised_words(sentences: Sequence[str]) -> list[str]:
    """The document's words after normalisation (module docstring); [] when none are left."""
    text = unicodedata.normalize("NFKC", " ".join(sentences)).casefold()
    return _DROPPED.sub("", text).split()


def exact_key(words: Sequence[str]) -> bytes:
    """Equal for two documents exactly when their normalised words are equal."""
    joined = " ".join(words).encode("utf-8")
    return hashlib.blake2b(joined, digest_size=EXACT_KEY_BYTES).digest()
