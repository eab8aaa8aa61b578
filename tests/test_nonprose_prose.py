"""pipelines/text/nonprose.py: what looks like a table line or a programme's time but is
prose stays whole (one justified line, a section number, a clock time whose sentence goes
on); exact values on literal text, through book_paragraphs."""

from __future__ import annotations

from collections import Counter

from pipelines.text.booktext import book_paragraphs


def paragraphs(text: str) -> tuple[list[str], dict[str, int]]:
    drops: Counter[str] = Counter()
    return book_paragraphs(text, drops=drops), dict(drops)


def test_one_justified_line_is_no_table_and_its_sentence_stays_whole() -> None:
    text = (
        "It  was  the  best  of  times,   it  was  the  worst  of   times, it\n"
        "was the age of wisdom, it was the age of foolishness.\n"
    )
    assert paragraphs(text) == (
        [
            "It was the best of times, it was the worst of times, it was the age of wisdom, "
            "it was the age of foolishness."
        ],
        {},
    )


def test_justified_lines_whose_gaps_do_not_line_up_are_no_table() -> None:
    text = (
        "It   was  the  best  of   times, it\n"
        "was  the  age   of  wisdom,   it was.\n\n"
        "Verse with a caesura   in the middle of the line,\n"
        "And another such line   to follow it home.\n"
    )
    assert paragraphs(text) == (
        [
            "It was the best of times, it was the age of wisdom, it was.",
            "Verse with a caesura in the middle of the line, And another such line to "
            "follow it home.",
        ],
        {},
    )


def test_a_table_inside_a_sentence_cuts_nothing() -> None:
    aligned = "Elizabeth    20    Longbourn\nJane         22    Longbourn\n"
    text = f"The numbers were, as\n{aligned}showed them, plain.\n\n{aligned}showed them.\n"
    assert paragraphs(text) == (
        [
            "The numbers were, as Elizabeth 20 Longbourn Jane 22 Longbourn showed them, plain.",
            "Elizabeth 20 Longbourn Jane 22 Longbourn showed them.",
        ],
        {},
    )


def test_a_table_after_a_sentence_or_a_caption_goes() -> None:
    text = (
        "She read the figures out.\n"
        "Apples      120     3.50\n"
        "Pears         8    12.00\n"  # right-aligned: the columns end in line
        "Mr. Bennet replied that he had not.\n\n"
        "Table 2 Prices\n"
        "| Apples | 120 |\n"
        "| Pears  | 8   |\n"
    )
    assert paragraphs(text) == (
        ["She read the figures out.", "Mr. Bennet replied that he had not."],
        {"table_lines": 4},  # the caption alone is a title (rule 6f of book_paragraphs)
    )


def test_a_section_number_is_no_time_and_goes_as_a_heading() -> None:
    text = (
        "2.15  The Theory of Sets\n"
        "In this section we show that every set has a power set\n"
        "which is strictly larger than the set itself.\n\n"
        "3.10\n"
        "The committee met twice that year and agreed on nothing.\n"
    )
    assert paragraphs(text) == (
        [
            "In this section we show that every set has a power set which is strictly larger "
            "than the set itself.",
            "The committee met twice that year and agreed on nothing.",
        ],
        {"headings": 2},
    )


def test_a_programme_entry_goes_and_the_prose_after_it_stays() -> None:
    text = (
        "9.30 a.m.  Registration\n\n"
        "12:30 PM  Lunch  (Dining Room A, Library Madison 620.  Exhibits\n"
        "          available.)\n\n"
        "11:00 AM  Session II.  Show and Tell.\n"
        "          Each presentation is followed by a discussion.\n\n"
        "9:00 AM  Breakfast\n"
        "The hotel served eggs and toast, and we talked about the day.\n\n"
        "9:00 AM  The Meeting\n"
        "was called to order by the chairman, who spoke at length.\n"
    )
    assert paragraphs(text) == (
        [
            "Each presentation is followed by a discussion.",
            "The hotel served eggs and toast, and we talked about the day.",
            "9:00 AM The Meeting was called to order by the chairman, who spoke at length.",
        ],
        {"schedule_entries": 4},
    )
