"""Tests for pipelines.text.booktext: exact values on literal inputs, then the real sample books."""

from __future__ import annotations

import io
import re
from functools import cache
from pathlib import Path

import pytest

from pipelines.text.bookdecode import DecodedBook, DecodeStats, LongTextLine, decode_book
from pipelines.text.booktext import (
    MAX_PARAGRAPH_CHARS,
    book_paragraphs,
    iter_book_paragraphs,
    line_documents,
)
from pipelines.text.gutenberg import book_title, strip_gutenberg

BOOKS_DIR = Path(__file__).resolve().parent.parent / "data" / "books"


# --------------------------------------------------------------------------------------
# book_paragraphs
# --------------------------------------------------------------------------------------


def test_reflow_joins_lines_and_collapses_whitespace() -> None:
    text = "  Alice was beginning   to get\nvery tired of sitting.\n\n\n \t \nShe ran\tacross the field.\n"
    assert book_paragraphs(text) == [
        "Alice was beginning to get very tired of sitting.",
        "She ran across the field.",
    ]


def test_reflow_hyphen_across_line_break_kept_without_space() -> None:
    text = "It took a watch out of its waistcoat-\npocket, and some-  \n  thing else.\n"
    assert book_paragraphs(text) == [
        "It took a watch out of its waistcoat-pocket, and some-thing else."
    ]


def test_reflow_hyphen_rule_needs_letters_on_both_sides() -> None:
    text = "The war of 1914-\n1918 ended, as did the year -\nthen peace.\n"
    assert book_paragraphs(text) == ["The war of 1914- 1918 ended, as did the year - then peace."]


def test_reflow_unspaced_dash_at_line_end() -> None:
    assert book_paragraphs("crashed around it--\nonce more the shriek.\n") == [
        "crashed around it--once more the shriek."
    ]


@pytest.mark.parametrize(
    "heading",
    [
        "CHAPTER I.",
        "CHAPTER XII",
        "BOOK 1",
        "Book the First",
        "Chapter 12. The Return of the Native Son",
        "PART TWO: THE LONG SEASON OF WINTER",
        "* * * * * * *",
        "-----",
        "***   ***   ***   ******   ***   ***   ***",
        "THE END",
        "The End.",
        "[The End]",
        "[Illustration: The Queen of Hearts]",
        "PRESERVATION AND IMAGING",
        "Preface",
        "Down the Rabbit-Hole",
        "A Caucus-Race and a Long Tale",
        "SCENE II\tLawn before the Duke's palace.",
        "ACT I",
    ],
)
def test_headings_dropped(heading: str) -> None:
    text = f"{heading}\n\nIt was a bright cold day in April.\n"
    assert book_paragraphs(text) == ["It was a bright cold day in April."]


def test_heading_line_leading_a_block_is_removed() -> None:
    assert book_paragraphs("CHAPTER I\nIt was a dark night, and cold.\n") == [
        "It was a dark night, and cold."
    ]


def test_numbered_words_in_prose_are_not_headings() -> None:
    text = "Part one of the plan failed.\n\nBook two was better than the first.\n"
    assert book_paragraphs(text) == [
        "Part one of the plan failed.",
        "Book two was better than the first.",
    ]


def test_long_all_caps_paragraph_kept() -> None:
    text = "THE ORIGINAL WAS IN CAPITALS ONLY AND SO WERE ALL THE OTHER ETEXTS OF THE TIME.\n"
    assert book_paragraphs(text) == [text.strip()]


def test_min_words() -> None:
    text = "Yes, sir.\n\nAlas!\n\nNo, truly, my lord.\n"
    assert book_paragraphs(text) == ["No, truly, my lord."]
    assert book_paragraphs(text, min_words=2) == ["Yes, sir.", "No, truly, my lord."]
    assert book_paragraphs(text, min_words=1) == ["Yes, sir.", "Alas!", "No, truly, my lord."]
    assert book_paragraphs(text, min_words=5) == []


def test_words_need_a_letter_or_digit() -> None:
    assert book_paragraphs("-- ... a b\n") == []  # 2 words at min_words=3


def test_play_speaker_tags_stage_directions_and_cast_list() -> None:
    text = (
        "\tAS YOU LIKE IT\n\n\n\tDRAMATIS PERSONAE\n\n\n"
        "DUKE SENIOR\tliving in banishment.\n\n"
        "AMIENS\t|\n\t|  lords attending on the banished duke.\nJAQUES\t|\n\n"
        "ACT I\n\n\n"
        "SCENE II\tLawn before the Duke's palace.\n\n\n"
        "\t[Enter CELIA and ROSALIND]\n\n"
        "CELIA\tI pray thee, Rosalind, sweet my coz, be merry.\n\n"
        "ROSALIND\tDear Celia, I show more mirth than I am mistress of;\n"
        "\tand would you yet I were merrier?\n\n"
        "CORIN\t                  Else are they very wretched.\n\n"
        "First Lord\tHe saw her bed-time, my good lord.\n\n"
        "\tSONG.\nAMIENS\tUnder the greenwood tree\n\tWho loves to lie with me,\n\n"
        "ORLANDO.\nAs I remember, Adam, it was upon this fashion.\n\n"
        "\t[Exeunt]\n"
    )
    assert book_paragraphs(text) == [
        "I pray thee, Rosalind, sweet my coz, be merry.",
        "Dear Celia, I show more mirth than I am mistress of; and would you yet I were merrier?",
        "Else are they very wretched.",
        "He saw her bed-time, my good lord.",
        "Under the greenwood tree Who loves to lie with me,",
        "As I remember, Adam, it was upon this fashion.",
    ]


def test_verse_paragraphs_split_at_first_line_indent() -> None:
    text = (
        "Of Man's first disobedience, and the fruit\n"
        "And justify the ways of God to men.\n"
        "  Say first--for Heaven hides nothing from thy view,\n"
        "Nor the deep tract of Hell--say first what cause\n"
    )
    assert book_paragraphs(text) == [
        "Of Man's first disobedience, and the fruit And justify the ways of God to men.",
        "Say first--for Heaven hides nothing from thy view, Nor the deep tract of Hell--say "
        "first what cause",
    ]


def test_ballad_stanza_with_alternating_indent_stays_whole() -> None:
    text = (
        "            `How doth the little crocodile\n"
        "              Improve his shining tail,\n"
        "            And pour the waters of the Nile\n"
        "              On every golden scale!\n"
    )
    assert book_paragraphs(text) == [
        "`How doth the little crocodile Improve his shining tail, And pour the waters of the "
        "Nile On every golden scale!"
    ]


def test_letterless_leading_line_removed() -> None:
    # plrabn12 has stray line counters such as "     00021053" before a verse paragraph.
    text = "     00021053  \nThou, therefore, whom thou only canst redeem,\nTheir nature also.\n"
    assert book_paragraphs(text) == [
        "Thou, therefore, whom thou only canst redeem, Their nature also."
    ]


def test_non_latin_all_caps_heading_dropped() -> None:
    assert book_paragraphs("ГЛАВА ПЕРВАЯ\n\nОн пришёл домой поздно вечером.\n") == [
        "Он пришёл домой поздно вечером."
    ]


def test_hanging_indent_is_not_split() -> None:
    text = "NOTES:\n     (1)  In this document, the phrase is used.\n     It means any text.\n"
    assert book_paragraphs(text) == ["(1) In this document, the phrase is used. It means any text."]


def test_paragraphs_of_empty_text() -> None:
    assert book_paragraphs("") == []
    assert book_paragraphs(" \n\n\t\n") == []


# --------------------------------------------------------------------------------------
# line_documents
# --------------------------------------------------------------------------------------


def test_line_documents_blank_lines_end_documents() -> None:
    lines = ["\n", "First sentence.\n", "  Second one.  \n", "\n", " \t\n", "Third.\n", "\n"]
    assert list(line_documents(lines)) == [["First sentence.", "Second one."], ["Third."]]


def test_line_documents_collapse_whitespace_as_reflow_does() -> None:
    lines = ["  Tabs\tbetween\t words.  \n", "\u00a0\n", "Two  spaces."]
    assert list(line_documents(lines)) == [["Tabs between words."], ["Two spaces."]]


def test_line_documents_without_blank_lines_cut_every_max_lines() -> None:
    lines = [f"s{i}" for i in range(5)]
    assert list(line_documents(lines, max_lines=2)) == [["s0", "s1"], ["s2", "s3"], ["s4"]]


def test_line_documents_exact_multiple_yields_no_empty_document() -> None:
    lines = ["a", "b", "c", "d", ""]
    assert list(line_documents(lines, max_lines=2)) == [["a", "b"], ["c", "d"]]


def test_line_documents_cap_also_applies_between_blank_lines() -> None:
    lines = ["a", "b", "c", "", "d"]
    assert list(line_documents(lines, max_lines=2)) == [["a", "b"], ["c"], ["d"]]


def test_line_documents_default_window_is_1000() -> None:
    docs = list(line_documents(f"sentence {i}\n" for i in range(2500)))
    assert [len(d) for d in docs] == [1000, 1000, 500]
    assert docs[1][0] == "sentence 1000"


def test_line_documents_from_file_object_is_lazy() -> None:
    stream = io.StringIO("one\ntwo\n\nthree\n")
    docs = line_documents(stream)
    assert next(docs) == ["one", "two"]
    assert stream.readline() == "three\n"  # the rest was not read yet


def test_line_documents_empty_input() -> None:
    assert list(line_documents([])) == []
    assert list(line_documents(["", "  ", "\n"])) == []


def test_line_documents_rejects_bad_max_lines() -> None:
    with pytest.raises(ValueError, match="max_lines"):
        line_documents(["a"], max_lines=0)
    with pytest.raises(ValueError, match="max_chars"):
        line_documents(["a"], max_chars=0)


def test_line_documents_cut_before_a_line_that_passes_max_chars() -> None:
    lines = ["aaaa", "bbb", "cc", "dddddddddd", "e", "", "f"]
    assert list(line_documents(lines, max_chars=7)) == [
        ["aaaa", "bbb"],
        ["cc"],
        ["dddddddddd"],
        ["e"],
        ["f"],
    ]


def test_a_long_line_ends_its_paragraph() -> None:
    data = b"The river ran north\npast the town.\n" + b"z" * 100 + b"\nIn winter it froze over."
    decoded = decode_book(data, max_line_bytes=50)
    assert decoded.long_lines == (LongTextLine(3, 100),)
    assert book_paragraphs(decoded.text) == [
        "The river ran north past the town.",
        "In winter it froze over.",
    ]


def test_iter_book_paragraphs_is_lazy() -> None:
    paragraphs = iter_book_paragraphs("One two three.\n\nFour five six.\n")
    assert next(paragraphs) == "One two three."
    assert list(paragraphs) == ["Four five six."]
    assert MAX_PARAGRAPH_CHARS == 1 << 20


# --------------------------------------------------------------------------------------
# Real sample books (data/books/)
# --------------------------------------------------------------------------------------

BOOKS = ["alice29", "asyoulik", "plrabn12", "lcet10"]


@cache
def _book(name: str) -> tuple[DecodedBook, str, bool, list[str]]:
    decoded = decode_book((BOOKS_DIR / f"{name}.txt").read_bytes())
    body, found = strip_gutenberg(decoded.text)
    return decoded, body, found, book_paragraphs(body)


@pytest.mark.parametrize("name", BOOKS)
def test_real_books_decode_as_utf8(name: str) -> None:
    decoded = _book(name)[0]
    # alice29 and plrabn12 end with DOS end-of-file bytes (SUB), removed and counted.
    controls = {"alice29": 1, "plrabn12": 2}.get(name, 0)
    assert decoded.stats == DecodeStats("utf-8", fallback_lines=0, controls_removed=controls)
    assert decoded.long_lines == ()
    assert "\r" not in decoded.text
    assert "\x1a" not in decoded.text


@pytest.mark.parametrize(
    ("name", "found", "title", "count"),
    [
        ("alice29", False, "alice29", 786),
        ("asyoulik", False, "asyoulik", 820),
        ("plrabn12", True, "Paradise Lost", 53),
        ("lcet10", True, "LOC WORKSHOP ON ELECTRONIC TEXTS", 628),  # 792 with lists, directory
    ],
)
def test_real_books_facts(name: str, found: bool, title: str, count: int) -> None:
    decoded, _, was_found, paragraphs = _book(name)
    assert was_found is found
    assert book_title(decoded.text, name) == title
    assert len(paragraphs) == count


@pytest.mark.parametrize("name", BOOKS)
def test_real_books_paragraphs_are_clean(name: str) -> None:
    body, paragraphs = _book(name)[1], _book(name)[3]
    assert "project gutenberg" not in body.lower()
    for para in paragraphs:
        assert para == " ".join(para.split())  # one line, single spaces, stripped
        assert "project gutenberg" not in para.lower()
        assert "small print" not in para.lower()
        assert not re.search(r"\be-?texts?\b", para, re.IGNORECASE)
        assert not (para.startswith("[") and para.endswith("]"))
        assert len(para.split()) >= 3


def test_alice_first_and_last_paragraphs() -> None:
    paragraphs = _book("alice29")[3]
    assert paragraphs[0] == (
        "Alice was beginning to get very tired of sitting by her sister on the bank, and of "
        "having nothing to do: once or twice she had peeped into the book her sister was "
        "reading, but it had no pictures or conversations in it, `and what is the use of a "
        "book,' thought Alice `without pictures or conversation?'"
    )
    assert paragraphs[1].startswith("So she was considering in her own mind")
    assert paragraphs[-1].startswith("Lastly, she pictured to herself")
    assert paragraphs[-1].endswith("remembering her own child-life, and the happy summer days.")
    assert "TOOK A WATCH OUT OF ITS WAISTCOAT-POCKET, and looked at it" in paragraphs[2]
    # Chapter headings and chapter titles are gone; "Who Stole the Tarts?" ends with "?"
    # and is kept as a (short) sentence.
    assert not any(p.startswith(("CHAPTER", "Down the Rabbit-Hole")) for p in paragraphs)


def test_play_paragraphs_are_speeches() -> None:
    body, paragraphs = _book("asyoulik")[1], _book("asyoulik")[3]
    assert body.startswith("\tAS YOU LIKE IT\n")
    # The cast list and the ACT/SCENE headings are gone; the first speech comes first.
    assert paragraphs[0].startswith(
        "As I remember, Adam, it was upon this fashion bequeathed me by will"
    )
    assert paragraphs[1] == "Yonder comes my master, your brother."
    assert paragraphs[-1].startswith("It is not the fashion to see the lady the epilogue;")
    assert paragraphs[-1].endswith("when I make curtsy, bid me farewell.")
    speakers = re.compile(r"^(ORLANDO|ROSALIND|CELIA|ADAM|DUKE SENIOR|TOUCHSTONE|CORIN)\b")
    assert not any(speakers.match(p) for p in paragraphs)
    assert "living in banishment." not in paragraphs


def test_paradise_lost_body_and_verse_paragraphs() -> None:
    _, body, _, paragraphs = _book("plrabn12")
    assert body.startswith("Paradise Lost \n")
    assert body.endswith("Through Eden took their solitary way. \n \n[The End]")
    assert paragraphs[0].startswith(
        "Of Man's first disobedience, and the fruit Of that forbidden tree whose mortal taste"
    )
    assert paragraphs[0].endswith(
        "I may assert Eternal Providence, And justify the ways of God to men."
    )
    assert paragraphs[1].startswith("Say first--for Heaven hides nothing from thy view,")
    assert paragraphs[-1].endswith("Through Eden took their solitary way.")
    assert not any(p.startswith("Book ") and len(p.split()) < 3 for p in paragraphs)


def test_lcet10_body_bounds() -> None:
    _, body, _, paragraphs = _book("lcet10")
    assert body.startswith("                      WORKSHOP ON ELECTRONIC TEXTS\n")
    assert body.endswith("[A few of the italics (when used for emphasis) were replaced by CAPS mh]")
    assert "End of The Project Gutenberg" not in body
    assert "INTRODUCTION" not in paragraphs
    assert paragraphs[-1].startswith(
        "Note: This file has been edited for use on computer networks."
    )
