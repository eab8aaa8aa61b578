"""A paragraph over 1 Mi characters is cut into pieces that are judged as the paragraph
they make, in the books stage (pipelines/text/booktext.py's cut_long_paragraphs) and the
corpus stage (pipelines/text/corpustext.py's record_paragraphs): the cut loses no word."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from pipelines import corpus
from pipelines.beam.documents import read_manifest
from pipelines.text.booktext import book_paragraphs, cut_long_paragraphs, iter_book_paragraphs
from pipelines.text.corpustext import ParagraphCounts, record_paragraphs
from tests.test_booktext import BOOKS, _book
from tests.test_corpus import documents, inputs_dir, jsonl, run

# --------------------------------------------------------------------------------------
# cut_long_paragraphs
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        # 14 characters: cut after the last line that fits in 12 ("aa bb\ncc dd" is 11).
        ("aa bb\ncc dd\nee\n\nff gg\nhh", 12, ("aa bb\ncc dd\n\x1e\nee\n\nff gg\nhh", 1)),
        # A block of exactly the bound, newlines counted, is whole.
        ("aa bb\ncc dd\nee\n\nff", 14, ("aa bb\ncc dd\nee\n\nff", 0)),
        # One block in three pieces counts once; the other block is cut too.
        (
            "a b\nc d\ne f\ng h\ni j\n\nk l\nm n\no p",
            7,
            ("a b\nc d\n\x1e\ne f\ng h\n\x1e\ni j\n\nk l\nm n\n\x1e\no p", 2),
        ),
        # A line over the bound is a piece by itself; alone in its block it is left as it is.
        ("ab\n" + "x" * 20 + "\ncd", 5, ("ab\n\x1e\n" + "x" * 20 + "\n\x1e\ncd", 1)),
        ("x" * 20 + "\n\nab", 5, ("x" * 20 + "\n\nab", 0)),
        # Separators of blank lines with spaces are kept as they are; an indented line
        # starting a piece keeps its indent. A cut is a blank line of U+001E.
        ("a b\n \t\n c d\n  e f\n", 6, ("a b\n \t\n c d\n\x1e\n  e f\n", 1)),
        ("", 1, ("", 0)),
    ],
)
def test_cut_long_paragraphs(text: str, max_chars: int, expected: tuple[str, int]) -> None:
    assert cut_long_paragraphs(text, max_chars) == expected


def test_cut_long_paragraphs_pieces_are_paragraphs_of_their_own() -> None:
    text = "The river ran north past the\nold town and the mill-\nPOND FROZE\nin the winter.\n"
    cut, blocks_cut = cut_long_paragraphs(text, 51)  # the first two lines are 51
    assert (cut, blocks_cut) == (
        "The river ran north past the\nold town and the mill-\n\x1e\nPOND FROZE\nin the winter.\n",
        1,
    )
    # The all-caps line leading the second piece is a heading there (rule 3), and the word
    # hyphenated across the cut is not joined (rule 5).
    assert book_paragraphs(cut) == [
        "The river ran north past the old town and the mill-",
        "in the winter.",
    ]
    assert book_paragraphs(text) == [
        "The river ran north past the old town and the mill-POND FROZE in the winter."
    ]


def test_cut_long_paragraphs_keeps_a_piece_of_one_long_word() -> None:
    # The middle piece is a single line of a single word: as a paragraph of its own rules
    # 6f and 7 would drop it, but the pieces are judged as the paragraph they make.
    text = "Start here with words.\n" + "a" * 30 + "\nand the end of it here.\n"
    cut, blocks_cut = cut_long_paragraphs(text, 25)
    assert (cut, blocks_cut) == (
        "Start here with words.\n\x1e\n" + "a" * 30 + "\n\x1e\nand the end of it here.\n",
        1,
    )
    assert book_paragraphs(cut) == ["Start here with words.", "a" * 30, "and the end of it here."]
    assert " ".join(book_paragraphs(cut)) == book_paragraphs(text)[0]


def test_cut_long_paragraphs_pieces_are_kept_or_dropped_together() -> None:
    cut = cut_long_paragraphs("Hello\nthere\n", 6)[0]
    assert cut == "Hello\n\x1e\nthere\n"
    assert book_paragraphs(cut, min_words=2) == ["Hello", "there"]  # "Hello there": 2 words
    assert book_paragraphs(cut, min_words=3) == []  # rule 7 on the paragraph, not the pieces
    # Rule 6b on the paragraph the pieces make: one bracketed span is dropped whole...
    note = "[Note:\none two three four five six seven eight nine ten\nend of note.]\n"
    assert book_paragraphs(cut_long_paragraphs(note, 20)[0]) == [] == book_paragraphs(note)
    # ... and text after its "]" keeps all of it.
    text = note.replace("end of note.]", "end] of note.")
    assert book_paragraphs(cut_long_paragraphs(text, 20)[0]) == [
        "[Note:",
        "one two three four five six seven eight nine ten",
        "end] of note.",
    ]
    # A piece split at a first-line indent (rule 2): its first paragraph is judged with the
    # piece before, its last with the piece after, each pair as the paragraph it makes.
    text = "aa bb cc dd ee ff gg hh\nSaid so.\n  Then more\nand more\nii jj kk ll mm nn oo pp\n"
    cut = cut_long_paragraphs(text, 30)[0]
    assert cut == text.replace("hh\n", "hh\n\x1e\n").replace("and more\n", "and more\n\x1e\n")
    assert book_paragraphs(cut, min_words=10) == [
        "aa bb cc dd ee ff gg hh",
        "Said so.",
        "Then more and more",
        "ii jj kk ll mm nn oo pp",
    ]
    assert book_paragraphs(cut, min_words=11) == ["Then more and more", "ii jj kk ll mm nn oo pp"]
    assert book_paragraphs(text, min_words=11) == ["Then more and more ii jj kk ll mm nn oo pp"]


def test_cut_long_paragraphs_leaves_real_books_alone() -> None:
    # Their longest block is a verse paragraph of Paradise Lost: 51,297 characters.
    for name in BOOKS:
        body = _book(name)[1]
        assert cut_long_paragraphs(body) == (body, 0)
        assert cut_long_paragraphs(body)[0] is body


def test_cut_long_paragraphs_bounds_a_book_without_blank_lines() -> None:
    line = "the river ran north past the old town where the railway was built"  # 65
    text = (line + "\n") * 40_000  # 2.6 MB, one block
    cut, blocks_cut = cut_long_paragraphs(text)
    assert blocks_cut == 1
    paragraphs = list(iter_book_paragraphs(cut))
    # 15,887 lines of 66 characters (newline counted, the last one not) fit in 1 MiB.
    assert [len(p) for p in paragraphs] == [66 * 15_887 - 1] * 2 + [66 * 8_226 - 1]
    assert " ".join(paragraphs) == " ".join(text.split())


def test_cut_long_paragraphs_refuses_a_bound_of_nothing() -> None:
    with pytest.raises(ValueError, match="max_chars must be >= 1, got 0"):
        cut_long_paragraphs("a", 0)


# --------------------------------------------------------------------------------------
# record_paragraphs
# --------------------------------------------------------------------------------------


def test_a_long_paragraph_is_cut_after_a_space() -> None:
    counts = ParagraphCounts()
    text = "aaaa bbbb cccc dddd\n\neeeeeeeeeeeeeee"
    assert list(record_paragraphs(text, 1, counts, max_chars=10)) == [
        "aaaa bbbb",
        "cccc dddd",
        "eeeeeeeeee",
        "eeeee",
    ]
    assert counts == ParagraphCounts(short=0, cut=2)


def test_a_cut_paragraph_is_judged_whole() -> None:
    # Its pieces of a single word ("words.", a window of "a", "end.") are kept: rule 5
    # counts the words of the paragraph, not of each piece.
    counts = ParagraphCounts()
    text = "Start here with words. " + "a" * 30 + " and the end."
    assert list(record_paragraphs(text, 3, counts, max_chars=20)) == [
        "Start here with",
        "words.",
        "a" * 20,
        "a" * 10 + " and the",
        "end.",
    ]
    assert counts == ParagraphCounts(short=0, cut=1)
    # A long paragraph of fewer words is dropped whole, as short (not cut); one of nothing
    # but spaces gives nothing and counts as cut, as before.
    text = "x" * 25 + " y\n\nOne two three.\n\n" + " " * 25
    assert list(record_paragraphs(text, 3, counts, max_chars=15)) == ["One two three."]
    assert counts == ParagraphCounts(short=1, cut=2)
    assert list(record_paragraphs(text, 2, max_chars=15)) == [
        "x" * 15,
        "x" * 10 + " y",
        "One two three.",
    ]


def test_the_stage_keeps_every_word_of_a_cut_paragraph(tmp_path: Path, monkeypatch) -> None:
    cut_at_20 = functools.partial(record_paragraphs, max_chars=20)
    monkeypatch.setattr(corpus.reading, "record_paragraphs", cut_at_20)
    text = "Start here with words. " + "a" * 30 + " and the end of it here."
    (inputs_dir(tmp_path) / "n.jsonl").write_bytes(jsonl([{"id": "x", "text": text}]))
    assert run(tmp_path / "in" / "*.jsonl", tmp_path / "out") == 0
    sentences = documents(tmp_path / "out")["corpus/x"]["sentences"]
    assert sentences == [
        "Start here with",
        "words.",
        "a" * 20,
        "a" * 10 + " and the",
        "end of it here.",
    ]
    counts = read_manifest(str(tmp_path / "out")).counts
    assert (counts.get("paragraphs_short"), counts["paragraphs_cut"]) == (None, 1)
