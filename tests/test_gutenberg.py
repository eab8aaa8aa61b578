"""Tests for pipelines.text.gutenberg: the Project Gutenberg header, licence and title, on literal texts."""

from __future__ import annotations

import pytest

from pipelines.text.gutenberg import book_title, strip_gutenberg

# --------------------------------------------------------------------------------------
# strip_gutenberg
# --------------------------------------------------------------------------------------

MODERN = """\
The Project Gutenberg eBook of Pride and Prejudice, by Jane Austen

This ebook is for the use of anyone anywhere in the United States and
most other parts of the world at no cost and with almost no restrictions
whatsoever.

Title: Pride and Prejudice

Author: Jane Austen

*** START OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***

Produced by Anonymous Volunteers


It is a truth universally acknowledged, that a single man in
possession of a good fortune, must be in want of a wife.

However little known the feelings or views of such a man may be.

*** END OF THE PROJECT GUTENBERG EBOOK PRIDE AND PREJUDICE ***

Updated editions will replace the previous one.
*** START: FULL LICENSE ***
*** START OF THE PROJECT GUTENBERG LICENSE ***
THE FULL PROJECT GUTENBERG LICENSE
"""

MODERN_BODY = """\
It is a truth universally acknowledged, that a single man in
possession of a good fortune, must be in want of a wife.

However little known the feelings or views of such a man may be."""


def test_strip_modern_format() -> None:
    # Header, producer credit, END marker and licence (with its START line) all removed.
    assert strip_gutenberg(MODERN) == (MODERN_BODY, True)


def test_strip_this_ebook_with_wrapped_start_marker() -> None:
    text = (
        "Title: A Very Long Title\n\n"
        "*** START OF THIS PROJECT GUTENBERG EBOOK A VERY LONG TITLE WITH A\n"
        "SUBTITLE ***\n\n"
        "It was a dark and stormy night.\n\n"
        "*** END OF THIS PROJECT GUTENBERG EBOOK A VERY LONG TITLE ***\n"
        "licence text\n"
    )
    assert strip_gutenberg(text) == ("It was a dark and stormy night.", True)


OLD_SMALL_PRINT = """\
**The Project Gutenberg Etext of The Time Machine, by H. G. Wells**
*This is a Project Gutenberg Etext, Details Below*

**Welcome To The World of Free Plain Vanilla Electronic Texts**

*****SMALL PRINT!*****
THIS ETEXT IS PROVIDED AS-IS.
*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*

The Time Traveller (for so it will be convenient to speak of him)
was expounding a recondite matter to us.

End of Project Gutenberg's The Time Machine, by H. G. Wells
"""


def test_strip_old_small_print_and_end_of_trailer() -> None:
    assert strip_gutenberg(OLD_SMALL_PRINT) == (
        "The Time Traveller (for so it will be convenient to speak of him)\n"
        "was expounding a recondite matter to us.",
        True,
    )


@pytest.mark.parametrize(
    "trailer",
    [
        "End of the Project Gutenberg EBook of Emma, by Jane Austen",
        "End of Project Gutenberg's Emma, by Jane Austen",
        "*End of The Project Gutenberg Etext of Emma",
        "End of this Project Gutenberg Etext of Emma.",
        "*** END OF THE PROJECT GUTENBERG EBOOK EMMA ***",
        "***END OF THE PROJECT GUTENBERG EBOOK EMMA***",
    ],
)
def test_strip_end_trailer_variants(trailer: str) -> None:
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK EMMA ***\n"
        "Emma Woodhouse, handsome, clever, and rich.\n\n"
        f"{trailer}\nlicence\n"
    )
    assert strip_gutenberg(text) == ("Emma Woodhouse, handsome, clever, and rich.", True)


OLD_UNMARKED = """\

This is the February 1992 Project Gutenberg release of:

Paradise Lost by John Milton

The oldest etext known to Project Gutenberg (ca. 1964-1965)

Introduction  (one page)

This etext was originally created in 1964-1965.

To give you an estimation of the difference in the original and
what we have today: the original was probably entered on cards.

This is the second version of Paradise Lost released by Project
Gutenberg.

Paradise Lost

Book I

Of Man's first disobedience, and the fruit
Of that forbidden tree whose mortal taste

[The End]
"""


def test_strip_old_header_without_marker() -> None:
    # Rule 2: the header runs to the last paragraph mentioning Gutenberg/etext.
    assert strip_gutenberg(OLD_UNMARKED) == (
        "Paradise Lost\n\nBook I\n\n"
        "Of Man's first disobedience, and the fruit\n"
        "Of that forbidden tree whose mortal taste\n\n[The End]",
        True,
    )


def test_strip_old_header_needs_gutenberg_in_first_paragraph() -> None:
    text = "A Preface\n\nThis etext is mine.\n\nThe story starts here, in earnest.\n"
    assert strip_gutenberg(text) == (text, False)


def test_strip_one_line_header_and_star_trailer() -> None:
    text = (
        "\nThe Project Gutenberg Etext of LOC WORKSHOP ON ELECTRONIC TEXTS\n\n\n"
        "                WORKSHOP ON ELECTRONIC TEXTS\n\n"
        "Acknowledgements\n\nI would like to thank Carl.\n\n\n"
        "*End of The Project Gutenberg Etext of LOC WORKSHOP ON ELECTRONIC ETEXTS\n"
    )
    assert strip_gutenberg(text) == (
        "                WORKSHOP ON ELECTRONIC TEXTS\n\n"
        "Acknowledgements\n\nI would like to thank Carl.",
        True,
    )


def test_strip_small_print_licence_at_end_of_file() -> None:
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
        "Line one of the book.\nLine two of the book.\nLine three of the book.\n"
        "*START*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*\nlicence\n"
    )
    assert strip_gutenberg(text) == (
        "Line one of the book.\nLine two of the book.\nLine three of the book.",
        True,
    )


def test_strip_small_print_in_first_half_does_not_end_body() -> None:
    # A header licence whose closing *END* line is damaged must not swallow the book.
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
        "*****SMALL PRINT!*****\n" + "The body goes on and on.\n" * 10
    )
    body, found = strip_gutenberg(text)
    assert found
    assert body.startswith("*****SMALL PRINT!*****\nThe body goes on")
    assert body.endswith("on and on.")


def test_strip_producer_credits() -> None:
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n"
        "E-text prepared by Jane Doe\nand the Online Distributed Proofreading Team\n\n"
        "Transcribed from the 1897 Macmillan edition by David Price.\n\n"
        "This is the book proper, with its first sentence.\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK X ***\n"
    )
    assert strip_gutenberg(text) == ("This is the book proper, with its first sentence.", True)


def test_strip_without_boilerplate_returns_text_unchanged() -> None:
    text = "\n\n  CHAPTER I\n\nA story that mentions gutenberg in passing.\n"
    body, found = strip_gutenberg(text)
    assert found is False
    assert body is text


# --------------------------------------------------------------------------------------
# book_title
# --------------------------------------------------------------------------------------


def test_title_field_with_continuation() -> None:
    text = (
        "The Project Gutenberg EBook of Something Else, by Nobody\n\n"
        "Title: The Adventures of Tom Sawyer,\n       Complete\n\nAuthor: Mark Twain\n\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK TOM SAWYER ***\nText.\n"
    )
    assert book_title(text, "fallback") == "The Adventures of Tom Sawyer, Complete"


def test_title_field_modern() -> None:
    assert book_title(MODERN, "x") == "Pride and Prejudice"


def test_title_from_gutenberg_etext_of_line() -> None:
    assert book_title(OLD_SMALL_PRINT, "x") == "The Time Machine"


def test_title_from_release_of_line_drops_by_author() -> None:
    assert book_title(OLD_UNMARKED, "x") == "Paradise Lost"


def test_title_from_start_marker() -> None:
    text = "*** START OF THE PROJECT GUTENBERG EBOOK ALICE'S ADVENTURES IN WONDERLAND ***\nText.\n"
    assert book_title(text, "x") == "ALICE'S ADVENTURES IN WONDERLAND"


def test_title_fallback_without_header() -> None:
    assert book_title("Just a story.\n\nTitle: not metadata\n", "alice29") == "alice29"


def test_title_line_inside_body_is_ignored() -> None:
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
        "Title: Inside The Book\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK X ***\n"
    )
    assert book_title(text, "fb") == "X"
