"""Sentence splitting: blingfire through its C function, plus the false-break repair."""

import blingfire
import pytest

from pipelines.text.sentences import split_paragraphs, split_sentences


@pytest.mark.parametrize(
    ("paragraph", "expected"),
    [
        (
            "Alberta is a province. It has 4.2 million people, per the U.S. Census Bureau! Why?",
            [
                "Alberta is a province.",
                "It has 4.2 million people, per the U.S. Census Bureau!",
                "Why?",
            ],
        ),
        (
            "It was founded in 1948. Dr. Samuel Jutzi spoke.",
            ["It was founded in 1948.", "Dr. Samuel Jutzi spoke."],
        ),
        (
            "Published by H. N. Abrams in 2008. It sold well.",
            ["Published by H. N. Abrams in 2008.", "It sold well."],
        ),
        (
            "See Graham v. Borgen for the rule. It applies.",
            ["See Graham v. Borgen for the rule.", "It applies."],
        ),
        ("He served in World War I. Then he left.", ["He served in World War I.", "Then he left."]),
        ("東京は大きい。次の文。", ["東京は大きい。", "次の文。"]),
        # The danda ends Hindi (and Bengali, Marathi, Sanskrit) sentences; blingfire's
        # model does not know it.
        (
            "लड़का स्कूल जाता है। वह खेलता है॥ शाम हुई।",
            ["लड़का स्कूल जाता है।", "वह खेलता है॥", "शाम हुई।"],
        ),
        ("", []),
        ("   ", []),
        ("One", ["One"]),
        ("It ends with Dr.", ["It ends with Dr."]),
    ],
)
def test_split_sentences(paragraph: str, expected: list[str]) -> None:
    assert split_sentences(paragraph) == expected


def test_matches_blingfire_where_there_is_no_false_break() -> None:
    paragraph = "The first sentence is here. The second one, with 3.5 km, is here too."
    assert split_sentences(paragraph) == blingfire.text_to_sentences(paragraph).split("\n")


def test_long_paragraph_grows_the_buffer() -> None:
    paragraph = "A short sentence here. " * 20000  # 460 kB, beyond the first buffer
    assert len(split_sentences(paragraph)) == 20000


def test_split_paragraphs_keeps_order() -> None:
    assert split_paragraphs(["A b. C d.", "E f."]) == ["A b.", "C d.", "E f."]
