"""pipelines/text/nonprose.py through book_paragraphs: lists, tables, contents, schedules,
name lists and headings inside blocks go, running text stays (exact values on literal
text), and what each rule drops from the real sample books."""

from __future__ import annotations

from collections import Counter

import pytest

from pipelines.text.booktext import book_paragraphs
from pipelines.text.nonprose import caps_share, paragraph_rule
from tests.test_booktext import _book


def paragraphs(text: str) -> tuple[list[str], dict[str, int]]:
    drops: Counter[str] = Counter()
    return book_paragraphs(text, drops=drops), dict(drops)


PROSE = "Mr. Bennet replied that he had not."


def test_a_pipe_table_and_a_spaced_table_go_line_by_line() -> None:
    text = (
        "She read the list aloud to them all.\n"
        "| Name       | Age | Town      |\n"
        "|------------|-----|-----------|\n"
        "| Elizabeth  | 20  | Longbourn |\n\n"
        "   Elizabeth     20     Longbourn\n"
        "   Jane          22     Longbourn\n"
        f"{PROSE}\n"
    )
    assert paragraphs(text) == (
        ["She read the list aloud to them all.", PROSE],
        {"table_lines": 5},
    )


def test_contents_lines_go_and_a_verse_line_with_its_number_stays() -> None:
    text = (
        "   CHAPTER I.                                               1\n"
        "   Chapter III. The Ball                                    9\n"
        "   The Assembly at Meryton                                 12\n"
        "   Mr. Darcy's Proposal ................................... 20\n"
        "   Epilogue . . . . . . xii\n\n"
        "Sing, Heavenly Muse, that, on the secret top          5\n"
        "Of Oreb, or of Sinai, didst inspire\n"
    )
    assert paragraphs(text) == (
        ["Sing, Heavenly Muse, that, on the secret top 5 Of Oreb, or of Sinai, didst inspire"],
        {"contents_lines": 5},
    )


def test_list_items_that_are_no_sentence_go_and_the_others_lose_their_marker() -> None:
    text = (
        "  * the first item of a bulleted list of several things\n"
        "  * the second item, which wraps onto\n"
        "    a second line and ends a sentence.\n\n"
        "  1. First numbered point of a list with several words.\n"
        "  2. Second numbered point\n\n"
        "(a) An item in brackets that is a sentence.\n\n"
        "• Imaging\n"
        "• Searchable coded texts\n\n"
        "     * Workshop participants should 1) begin to think about working\n"
        "     with images, and\n"
        "     2) find a common way to build text and images together.\n"
    )
    assert paragraphs(text) == (
        [
            "the second item, which wraps onto a second line and ends a sentence.",
            "First numbered point of a list with several words.",
            "An item in brackets that is a sentence.",
            "Workshop participants should 1) begin to think about working with images, and "
            "2) find a common way to build text and images together.",
        ],
        {"list_items": 4},
    )


def test_topics_listed_inline_go_and_prose_with_an_asterisk_stays() -> None:
    text = (
        "DISCUSSION * Additional features of OJCCT * Pricing of the journal *\n"
        "+++++++++++++++++++++++++++++++++++++++++\n\n"
        "The footnote marker * sits in the middle of this sentence.\n"
    )
    assert paragraphs(text) == (
        ["The footnote marker * sits in the middle of this sentence."],
        {"list_items": 1},
    )


def test_a_programme_goes_and_a_diary_entry_stays() -> None:
    text = (
        "9:00 AM   Welcome\n\n"
        "          Prosser Gifford, Director for Scholarly Programs, and Carl\n"
        "             Fleischhauer, Coordinator, American Memory, Library of\n"
        "             Congress\n\n"
        "9:l5 AM   Session I.  Content in a New Form:  Who Will Use It and What\n"
        "          Will They Do?\n\n"
        "10:30-\n"
        "11:00 AM  Break\n\n"
        "2:30 P.M.  We left the hotel and walked slowly down to the station.\n"
    )
    assert paragraphs(text) == (
        ["2:30 P.M. We left the hotel and walked slowly down to the station."],
        {"schedule_entries": 3, "name_lists": 1},
    )


def test_names_and_addresses_go_and_capitalised_prose_stays() -> None:
    text = (
        "     Pamela Q.J. Andre\n"
        "     Associate Director, Automation\n"
        "     National Agricultural Library\n"
        "     Phone:  (301) 504-6813\n\n"
        "The Assembly at Meryton 12 Mr. Darcy's Proposal 20\n\n"
        "He moved to Washington, D.C.\n\n"
        "Anne KENNEY and Lynne PERSONIUS explained how the concept of a faithful copy\n"
        "guided their project at Cornell University.\n\n"
        "The Owl and the Pussy-cat went to sea\n"
        "In a beautiful pea-green boat\n"
    )
    assert paragraphs(text) == (
        [
            "He moved to Washington, D.C.",
            "Anne KENNEY and Lynne PERSONIUS explained how the concept of a faithful copy "
            "guided their project at Cornell University.",
            "The Owl and the Pussy-cat went to sea In a beautiful pea-green boat",
        ],
        {"name_lists": 2},
    )


def test_headings_inside_a_book_of_one_paragraph_a_line_go() -> None:
    first = (
        "It was a bright cold day in April, and the clocks were striking thirteen. Winston "
        "Smith slipped quickly through the glass doors of Victory Mansions."
    )
    second = (
        "As he put his hand to the door-knob Winston saw that he had left the diary open on "
        "the table. DOWN WITH BIG BROTHER was written all over it."
    )
    text = f"Chapter 1\n{first}\nChapter 2\n{second}\nDown the Rabbit-Hole\n{first}\nContents\n"
    assert paragraphs(text) == ([first, second, first], {"headings": 4})


def test_a_heading_word_wrapped_inside_prose_stays() -> None:
    text = (
        "She said it was the end of the story.\n"
        "Chapter two of her life began that day.\n"  # no heading: a lowercase title
        "the preface of the book was long\n"
    )
    assert paragraphs(text) == (
        [
            "She said it was the end of the story. Chapter two of her life began that day. "
            "the preface of the book was long"
        ],
        {},
    )


@pytest.mark.parametrize(
    ("text", "share"),
    [("Options for Dissemination", 2 / 3), ("of Congress (Beyond the scholar)", 0.4), ("", 0.0)],
)
def test_caps_share(text: str, share: float) -> None:
    assert caps_share(text) == pytest.approx(share)


def test_paragraph_rule() -> None:
    assert paragraph_rule("Moderator: Jacqueline Hess, Director, National Demonstration Lab") == (
        "name_lists"
    )
    assert paragraph_rule("GIFFORD * Origin of Workshop * Desiderata arising *") == "list_items"
    assert paragraph_rule("Session II. Show and Tell: Jacqueline Hess (Moderator).") is None


# --------------------------------------------------------------------------------------
# The real sample books
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "drops", "kept"),
    [
        ("alice29", {}, 786),
        ("asyoulik", {}, 820),
        ("plrabn12", {}, 53),
        ("lcet10", {"name_lists": 94, "list_items": 65, "schedule_entries": 20}, 628),
    ],
)
def test_what_each_rule_drops_from_the_sample_books(
    name: str, drops: dict[str, int], kept: int
) -> None:
    found, dropped = paragraphs(_book(name)[1])
    assert (dropped, len(found)) == (drops, kept)


def test_lcet10_keeps_its_prose_and_loses_its_lists_and_directory() -> None:
    found = paragraphs(_book("lcet10")[1])[0]
    text = "\n".join(found)
    for gone in ("Session II.", "SESSION IV.", "11:00 AM", "Phone:", "* Imaging", "\n1.\n"):
        assert gone not in text
    # A bullet that is a paragraph of prose stays, without its bullet.
    assert "The SGML text can be tailored as users wish." in found
    assert any(p.startswith("Workshop participants should 1) begin to think") for p in found)
    assert found[0] == "Library of Congress Washington, D.C."  # a title page: not caught
