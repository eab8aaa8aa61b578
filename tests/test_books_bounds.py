"""`bertkit books` on a book of one paragraph and no full stop: memory bounded.

A 58 MB book hard-wrapped without a blank line or a full stop was one paragraph and one
sentence: it peaked at 1.85 GB (its words as a list of strings, blingfire's buffers). Now the
paragraph is cut at line boundaries every 1 Mi characters and each sentence over 16,384
characters after the last space of each window; what is left is the book itself, a few
copies of it (its bytes, its text, its sentences, the Parquet row).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds

from pipelines import books
from pipelines.bert.sentence_cuts import MAX_SENTENCE_CHARS
from pipelines.text.booktext import cut_long_paragraphs

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["river", "town", "sea", "old", "bright", "the", "and", "railway", "harbour", "winter"]
SMALL_BOOK = (
    "The river ran north past the old town,\nwhere the railway had been built early.\n\n"
    "In winter the lake froze over\nand people crossed it on foot.\n"
)

# The command in a child of a child: RUSAGE_CHILDREN is then that one run's peak alone.
_PEAK_RSS = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "bertkit", "books", *sys.argv[1:]], check=True)
print(0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def one_paragraph_book(lines: int) -> str:
    """`lines` lines of 10 words (57 characters), no blank line, no sentence punctuation."""
    words = np.random.default_rng(0).choice(WORDS, (lines, 10)).tolist()
    return "".join(" ".join(line) + "\n" for line in words)


def _peak_mb(book: str, directory: Path) -> int:
    (directory / "in").mkdir(parents=True)
    (directory / "in" / "book.txt").write_text(book)
    argv = ["--input", str(directory / "in" / "*.txt"), "--output", str(directory / "out")]
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *argv], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    code, peak = result.stdout.split()[-2:]
    assert code == "0", result.stderr
    return int(peak)


def test_a_book_of_one_paragraph_and_no_full_stop_is_cut_and_its_memory_bounded(
    tmp_path: Path,
) -> None:
    book = one_paragraph_book(200_000)  # 11.4 MB
    # Measured over the small book's peak (181 MB): +312 MB before the cuts (one paragraph,
    # one sentence of 11.4 MB), +128 MB after: the book's bytes, text and sentences, the
    # Parquet writer's buffers for its one row, and one paragraph of 1 Mi characters at a time.
    peaks = [_peak_mb(SMALL_BOOK, tmp_path / "small"), _peak_mb(book, tmp_path / "big")]
    assert len(book) == 11_404_246
    assert peaks[1] - peaks[0] < 200, peaks

    manifest = json.loads((tmp_path / "big" / "out" / "_manifest.json").read_text())
    # 11 paragraphs of at most 1 Mi characters, each one sentence to blingfire, each cut
    # after the last space of its 16,384-character windows: 707 sentences. Of the text only
    # the 11 paragraphs' last line breaks and the 696 spaces at the sentence cuts are gone.
    assert manifest["counts"] == {
        "documents": 1,
        "files": 1,
        "input_bytes": 11_404_246,
        "input_files": 1,
        "paragraphs_cut": 1,
        "rejected": 0,
        "sentences": 707,
        "sentences_cut": 11,
        "text_bytes": 11_404_246 - 11 - 696,
        "units": 1,
    }
    (row,) = ds.dataset(tmp_path / "big" / "out").to_table().to_pylist()
    sentences = row["sentences"]
    assert max(len(s) for s in sentences) == MAX_SENTENCE_CHARS - 1  # cut after a space
    assert " ".join(sentences).split() == book.split()  # not a word lost or moved


def test_a_cut_paragraph_keeps_its_piece_of_one_word(tmp_path: Path, monkeypatch) -> None:
    # The piece of one long word alone would be a title (rule 6f) of under 3 words (rule 7);
    # the pieces are judged as the paragraph they make, so no word of it is lost.
    cut_at_30 = functools.partial(cut_long_paragraphs, max_chars=30)
    monkeypatch.setattr(books.reading, "cut_long_paragraphs", cut_at_30)
    (tmp_path / "in").mkdir()
    book = "Start here with words.\n" + "a" * 40 + "\nand the end of it here.\n"
    (tmp_path / "in" / "book.txt").write_text(book)
    out = tmp_path / "out"
    assert books.run(["--input", str(tmp_path / "in" / "*.txt"), "--output", str(out)]) == 0
    (row,) = ds.dataset(out).to_table().to_pylist()
    assert row["sentences"] == ["Start here with words.", "a" * 40, "and the end of it here."]
    counts = json.loads((out / "_manifest.json").read_text())["counts"]
    assert (counts["paragraphs_cut"], counts["text_bytes"]) == (1, len(book) - 3)
