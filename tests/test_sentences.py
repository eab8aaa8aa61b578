"""Sentence splitting: blingfire through its C function, plus the false-break repair."""

import blingfire
import pytest

from pipelines.text.sentences import _rejoin_false_breaks, split_paragraphs, split_sentences


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
        # An abbreviation in another case than its own is a word that ends the sentence.
        (
            "The rocket was comparable to the Saturn V. Meanwhile, they tried again.",
            ["The rocket was comparable to the Saturn V.", "Meanwhile, they tried again."],
        ),
        (
            "Most supplies run at 240 V. For the same power the current is lower.",
            ["Most supplies run at 240 V.", "For the same power the current is lower."],
        ),
        ("Voters said no. The law failed.", ["Voters said no.", "The law failed."]),
        (
            "The tower is 300 ft. It was built in 1900.",
            ["The tower is 300 ft.", "It was built in 1900."],
        ),
        ("It was Brown v. Board of Education.", ["It was Brown v. Board of Education."]),
        ("The film Rocky V. It was bad.", ["The film Rocky V.", "It was bad."]),
        # A quotation that ends in "?" or "!" then a lower-case word goes on.
        (
            '"What were you doing, and why?" asked the Guru in the garden.',
            ['"What were you doing, and why?" asked the Guru in the garden.'],
        ),
        ('She said: "Go away!" the man went.', ['She said: "Go away!" the man went.']),
        ('"Why?" He left.', ['"Why?"', "He left."]),
        # blingfire breaks after "?," inside a list; no sentence ends with a comma.
        (
            "It adds 3 instructions (B=0?, A=0?, GOTO) to the program.",
            ["It adds 3 instructions (B=0?, A=0?, GOTO) to the program."],
        ),
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


@pytest.mark.parametrize(
    ("sentences", "expected"),
    [
        # Titles join only as written, capitalised.
        (["I met Dr.", "Smith."], ["I met Dr. Smith."]),
        (["I met Sgt.", "Smith."], ["I met Sgt. Smith."]),
        (["It was the DR.", "Smith case."], ["It was the DR.", "Smith case."]),
        (["He lived in Ft.", "Worth."], ["He lived in Ft. Worth."]),
        (["The tower is 300 ft.", "It is old."], ["The tower is 300 ft.", "It is old."]),
        # no., nos., fig., vol., pp., ca., in any case, only before a number.
        (["It was No.", "5 in the list."], ["It was No. 5 in the list."]),
        (["They were nos.", "12 and 14."], ["They were nos. 12 and 14."]),
        (["See Fig.", "3 here."], ["See Fig. 3 here."]),
        (["See VOL.", "2 there."], ["See VOL. 2 there."]),
        (["See pp.", "12–14."], ["See pp. 12–14."]),
        (["Built ca.", "1900."], ["Built ca. 1900."]),
        (["Voters said no.", "The law failed."], ["Voters said no.", "The law failed."]),
        (["He said No.", "Then he left."], ["He said No.", "Then he left."]),
        # v. and vs. only lower-case as written.
        (["It was Roe v.", "Wade."], ["It was Roe v. Wade."]),
        (["It was Ali vs.", "Frazier."], ["It was Ali vs. Frazier."]),
        (["It was the Saturn V.", "It flew."], ["It was the Saturn V.", "It flew."]),
        (["It was the Saturn VS.", "It flew."], ["It was the Saturn VS.", "It flew."]),
        # A quotation ending in ?" !" ?” !” ?’ !’ ?' !' before a lower-case word.
        (['"Why?"', "he asked."], ['"Why?" he asked.']),
        (['"Stop!"', "he said."], ['"Stop!" he said.']),
        (["“Why?”", "he asked."], ["“Why?” he asked."]),
        (["“Stop!”", "he said."], ["“Stop!” he said."]),
        (["‘Why?’", "he asked."], ["‘Why?’ he asked."]),
        (["‘Stop!’", "he said."], ["‘Stop!’ he said."]),
        (["'What were you doing?'", "asked the Guru."], ["'What were you doing?' asked the Guru."]),
        (["'Stop!'", "he said."], ["'Stop!' he said."]),
        (['"Why?"', "He left."], ['"Why?"', "He left."]),
        (['He said "yes."', "then left."], ['He said "yes."', "then left."]),
        (['"Why?"', "5 left."], ['"Why?"', "5 left."]),
        # A break after a comma or semicolon.
        (["It adds (B=0?,", "A=0?,", "GOTO)."], ["It adds (B=0?, A=0?, GOTO)."]),
        (["It adds (B=0?;", "GOTO)."], ["It adds (B=0?; GOTO)."]),
        # Initials, as before; a join may chain.
        (["H.", "N.", "Abrams wrote it."], ["H. N. Abrams wrote it."]),
        (["By H.", "N. Abrams."], ["By H.", "N. Abrams."]),
        (["L.", "Smith wrote it."], ["L. Smith wrote it."]),
        (["One."], ["One."]),
        ([], []),
    ],
)
def test_rejoin_false_breaks(sentences: list[str], expected: list[str]) -> None:
    assert _rejoin_false_breaks(sentences) == expected
