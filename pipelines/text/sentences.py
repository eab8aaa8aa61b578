"""Sentence segmentation of paragraphs, Beam-free.

blingfire ships its model inside the wheel (nothing to download, unlike NLTK's punkt) and
was the fastest of the splitters compared when it was chosen (nupunkt, pysbd). It handles
abbreviations ("Dr.", "U.S."), decimals and quotes. It reads newlines as spaces, so it is
called once per paragraph.

The C function is called directly, with one reused output buffer per thread: blingfire's
own `text_to_sentences` allocates and zero-fills a buffer twice the input's size on every
call (a third of the splitting time on Wikipedia's many short paragraphs), and returns ""
when the output does not fit, which would drop a paragraph silently; here that is an error.
Its shared library is loaded from the installed package the way the package loads it, but
without running the package's `__init__`: that looks up its own source file through
`inspect`, which walks every module loaded, a long walk in a process that imported Beam.
"""

from __future__ import annotations

import ctypes
import importlib.util
import platform
import re
import threading
from collections.abc import Iterable
from pathlib import Path

# blingfire's shared library, per platform, as its package names it.
_LIBRARY_NAMES = {"Windows": "blingfiretokdll.dll", "Darwin": "libblingfiretokdll.dylib"}


def _load_library() -> ctypes.CDLL:
    spec = importlib.util.find_spec("blingfire")
    if spec is None or spec.origin is None:
        raise ImportError("blingfire is not installed (pip install blingfire)")
    name = _LIBRARY_NAMES.get(platform.system(), "libblingfiretokdll.so")
    return ctypes.cdll.LoadLibrary(str(Path(spec.origin).parent / name))


_LIBRARY = _load_library()
# A function object of our own (indexing makes a new one), so that declaring its argument
# types, which lets ctypes convert them without a wrapper object each, changes nothing for
# blingfire's own functions where the package is imported too.
_text_to_sentences = _LIBRARY["TextToSentences"]
_text_to_sentences.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
_text_to_sentences.restype = ctypes.c_int
_local = threading.local()  # Beam's multi_threading runner calls from several threads


class SentenceSplitError(RuntimeError):
    """blingfire could not split a paragraph."""


def _buffer(size: int) -> ctypes.Array:
    buffer = getattr(_local, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _local.buffer = ctypes.create_string_buffer(max(size, 1 << 16))
    return buffer


def split_sentences(paragraph: str) -> list[str]:
    """One paragraph (a single line of text) → its sentences, stripped, none empty."""
    if not paragraph or paragraph.isspace():
        return []
    data = paragraph.encode("utf-8")
    buffer = _buffer(2 * len(data) + 16)  # blingfire's own bound for the output
    length = _text_to_sentences(data, len(data), buffer, len(buffer))
    if length < 0 or length > len(buffer):
        raise SentenceSplitError(f"blingfire failed ({length}) on: {paragraph[:80]!r}…")
    text = ctypes.string_at(buffer, length).rstrip(b"\0").decode("utf-8")
    sentences = [part.strip() for part in text.split("\n")]
    if "" in sentences:
        sentences = [sentence for sentence in sentences if sentence]
    if "\u0964" in paragraph or "\u0965" in paragraph:
        sentences = [part for each in sentences for part in _DANDA_BREAK.split(each)]
    return _rejoin_false_breaks(sentences)


# blingfire does not end a sentence at the danda (।, ॥), the full stop of Hindi, Bengali,
# Marathi, Nepali and Sanskrit text: each is a break where space follows it.
_DANDA_BREAK = re.compile(r"(?<=[\u0964\u0965])\s+")


# blingfire breaks after a title before a name ("Dr. | Samuel Jutzi"), after initials
# ("H. | N. | Abrams"), after an abbreviation before its number ("No. | 5") and after a
# quotation that ends in "?" or "!" when the sentence goes on ('"Why?" | asked the Guru').
# None of these ends a sentence in running text, so the next sentence is joined back on.
# Each abbreviation is matched as it is written, so that a word that reads the same in
# another case still ends a sentence: "Saturn V." and "240 V." do ("Roe v. Wade" does not),
# "300 ft." does ("Ft. Worth" does not), "said no." does ("No. 5" does not).
# Titles: only capitalised as written.
_TITLES = frozenset(
    {
        "Dr.",
        "Mr.",
        "Mrs.",
        "Ms.",
        "Prof.",
        "St.",
        "Mt.",
        "Ft.",
        "Gen.",
        "Gov.",
        "Sen.",
        "Rep.",
        "Rev.",
        "Capt.",
        "Lt.",
        "Col.",
        "Sgt.",
        "Brig.",
        "Maj.",
        "Adm.",
    }
)
# Before a number only, in any case ("no. 5", "No. 5", "pp. 12", "ca. 1900").
_BEFORE_NUMBER = frozenset({"no.", "nos.", "fig.", "vol.", "pp.", "ca."})
# Only lower-case as written: "Roe v. Wade", "Ali vs. Frazier".
_VERSUS = frozenset({"v.", "vs."})
# A quotation ending in "?" or "!" then a lower-case word: the sentence goes on.
_QUOTE_CLOSES = frozenset("\"'”’")


def _is_false_break(sentence: str, following: str) -> bool:
    """Whether blingfire's break between `sentence` and `following` is inside a sentence."""
    end = sentence[-1]
    if end == "," or end == ";":  # "(B=0?, | A=0?, | GOTO)": no sentence ends with these
        return True
    if end in _QUOTE_CLOSES:
        return len(sentence) > 1 and sentence[-2] in "?!" and following[0].islower()
    if end != ".":  # every abbreviation and initial ends with "."
        return False
    last = sentence.rsplit(None, 1)[-1].lstrip("\"'(“‘")
    if last in _TITLES or last in _VERSUS:
        return True
    if last.lower() in _BEFORE_NUMBER:
        return following[0].isdigit()
    # A "sentence" made only of initials ("L.", "H. N.") is a break inside a name.
    if len(last) != 2 or not last[0].isupper():
        return False
    return all(len(w) == 2 and w[0].isupper() and w[1] == "." for w in sentence.split())


def _rejoin_false_breaks(sentences: list[str]) -> list[str]:
    if len(sentences) < 2:
        return sentences
    joined = [sentences[0]]
    for sentence in sentences[1:]:
        if _is_false_break(joined[-1], sentence):
            joined[-1] = f"{joined[-1]} {sentence}"
        else:
            joined.append(sentence)
    return joined


def split_paragraphs(paragraphs: Iterable[str]) -> list[str]:
    """Sentences of several paragraphs, in order."""
    sentences: list[str] = []
    for paragraph in paragraphs:
        sentences.extend(split_sentences(paragraph))
    return sentences
