"""The data report's line under a plot says what these data show: the NotNext share about
balanced, skewed or one class."""

from __future__ import annotations

import pytest

from pipelines.inspect.report_data import SplitSection
from pipelines.inspect.report_sections import not_next_meaning

BALANCED = (
    "the next-sentence task is about balanced (40%–60% NotNext), so an NSP accuracy near "
    "50 % means the model has learnt nothing of it"
)
IS_NEXT_ONLY = (
    "seq128/heldout holds IsNext pairs only, as the examples stage warned: a NotNext pair "
    "takes its second segment from another document of the same split, and it had none, so "
    "next-sentence prediction there sees one class (give the split two or more documents, or "
    "train with --objective mlm)"
)


def split(label: str, examples: int, not_next: int) -> SplitSection:
    return SplitSection(label, 128, 20, examples=examples, not_next=not_next)


@pytest.mark.parametrize(
    ("splits", "no_partner", "meaning"),
    [
        ([split("seq128/train", 1000, 539)], False, f"seq128/train 53.9% NotNext: {BALANCED}."),
        (
            # The sample's books alone at --max-seq-length 64: four long documents.
            [split("seq64/train", 4226, 3000), split("seq64/heldout", 0, 0)],
            False,
            "seq64/train 71.0% NotNext (seq64/heldout: no examples): seq64/train is skewed "
            "towards NotNext (outside 40%–60% NotNext): always answering NotNext scores 71.0% "
            "there, so read its NSP accuracy against that, not 50 %.",
        ),
        (
            [split("seq128/train", 10, 3)],
            False,
            "seq128/train 30.0% NotNext: seq128/train is skewed towards IsNext (outside 40%–60% "
            "NotNext): always answering IsNext scores 70.0% there, so read its NSP accuracy "
            "against that, not 50 %.",
        ),
        (
            # A one-document held-out split: its NotNext chunks were rejected (no partner).
            [split("seq128/train", 5, 3), split("seq128/heldout", 4, 0)],
            True,
            "seq128/train 60.0%, seq128/heldout 0.0% NotNext: the next-sentence task is about "
            "balanced (40%–60% NotNext in seq128/train), so an NSP accuracy near 50 % means the "
            f"model has learnt nothing of it; {IS_NEXT_ONLY}.",
        ),
        (
            [split("seq128/train", 2, 0)],
            False,
            "seq128/train 0.0% NotNext: seq128/train holds IsNext pairs only, so next-sentence "
            "prediction there sees one class (give the split two or more documents, or train "
            "with --objective mlm).",
        ),
        (
            [split("seq128/train", 7, 7)],
            False,
            "seq128/train 100.0% NotNext: seq128/train holds NotNext pairs only (a chunk of one "
            "sentence always takes a random next), so next-sentence prediction there sees one "
            "class.",
        ),
        ([split("seq128/train", 0, 0)], False, "no examples, so no next-sentence pairs to count."),
    ],
    ids=["balanced", "skewed NotNext", "skewed IsNext", "one class", "IsNext", "NotNext", "none"],
)
def test_the_notnext_line_says_balanced_skewed_or_one_class(splits, no_partner, meaning) -> None:
    assert not_next_meaning(splits, no_partner) == meaning
