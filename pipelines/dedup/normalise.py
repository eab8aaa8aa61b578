"""What two documents must share to be the same text: their normalised words.

A document's sentences are joined with spaces, put in Unicode NFKC form (compatibility
characters such as ligatures, full-width letters and non-breaking spaces become their plain
forms) and case-folded; every character that is neither a letter, a combining mark (the
vowel signs and viramas of Devanagari, Bengali, Tamil, Thai: part of their letters), a
digit, an underscore nor whitespace (punctuation, quotes, dashes, symbols) is dropped,
except between two digits, where it is a space ("3-10" is not "31-0"), and the text is split
on whitespace. So the same book as another edition (other line wrapping, straight or curly
quotes, `--` or an em dash, another case in its headings) gives the same words, and
"don't" and "don’t" are both `dont`. A text of symbols only (no word left) keeps them as its
words, so two such texts are the same only where their symbols are.

Scripts written without spaces between words (Chinese, Japanese kana, Thai, Lao, Khmer,
Myanmar) have no word a space could mark: each of their characters is a word of its own, so
"模型训练" gives 模 型 训 练, the same as "模型 训练", and word n-grams over such text are
character n-grams: a copy with a few characters changed shares most of them
(tests/test_dedup_unspaced.py).

The exact key is a 128-bit BLAKE2b hash of those words joined by single spaces; near
duplicates are found on word n-grams of the same words (minhash.py).
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import unicodedata
from collections.abc import Sequence

_BETWEEN_DIGITS = re.compile(r"(?<=\d)[^\w\s]+(?=\d)")
# The blocks of the scripts written without spaces between words: Thai, Lao, Myanmar,
# Khmer; the ideographic iteration and closing marks and number zero; Hiragana, Katakana
# and Bopomofo; CJK Unified Ideographs (with extension A), Compatibility Ideographs, and
# the ideographs' extensions B to H in the supplementary planes.
_UNSPACED_BLOCKS = (
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1780, 0x17FF),
    (0x3005, 0x3007),
    (0x3040, 0x312F),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x323AF),
)
_UNSPACED = re.compile(
    "([" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _UNSPACED_BLOCKS) + "])"
)
EXACT_KEY_BYTES = 16


@functools.cache
def _dropped() -> re.Pattern[str]:
    """Neither a word character nor whitespace nor a combining mark (which `\\w` leaves
    out): built once per process from Unicode's categories (M*), as ranges."""
    ranges: list[tuple[int, int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)).startswith("M"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    marks = "".join(f"{chr(a)}-{chr(b)}" if a < b else chr(a) for a, b in ranges)
    return re.compile(f"[^\\w\\s{marks}]+")


def normalised_words(sentences: Sequence[str]) -> list[str]:
    """The document's words after normalisation (module docstring)."""
    text = unicodedata.normalize("NFKC", " ".join(sentences)).casefold()
    kept = _dropped().sub("", _BETWEEN_DIGITS.sub(" ", text))
    words = (kept if kept.isascii() else _UNSPACED.sub(r" \1 ", kept)).split()
    return words or text.split()


def exact_key(words: Sequence[str]) -> bytes:
    """Equal for two documents exactly when their normalised words are equal."""
    joined = " ".join(words).encode("utf-8")
    return hashlib.blake2b(joined, digest_size=EXACT_KEY_BYTES).digest()
