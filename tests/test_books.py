"""The books stage: the transform, the real sample, the lines format and bad files."""

import bz2
import gzip
import json
import shutil
import tracemalloc
from dataclasses import replace
from pathlib import Path

import apache_beam as beam
import pyarrow.dataset as ds
import pytest
from apache_beam.testing.util import assert_that, equal_to

from pipelines import books
from pipelines.beam.documents import UnitTally, read_manifest
from pipelines.beam.inputs import expand_inputs
from pipelines.books import (
    BooksConfig,
    ExtractBooks,
    book_name,
    book_sentences,
    common_root,
    line_file_documents,
    plan_units,
)
from schemas import REJECTS_DIR

CONFIG = BooksConfig(input=("books/*.txt",), output="out")  # the flags' defaults

STORY = (
    "The river ran north past the old town,\nwhere the railway had been built early.\n\n"
    "In winter the lake froze over\nand people crossed it on foot.\n"
)


def documents(directory: Path) -> dict[str, dict]:
    return {row["id"]: row for row in ds.dataset(directory).to_table().to_pylist()}


def test_extract_books_transform(tmp_path: Path, test_pipeline) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "story.txt").write_text(STORY)
    (tmp_path / "in" / "empty.txt").write_bytes(b"")
    inputs = expand_inputs([str(tmp_path / "in" / "*.txt")])
    with test_pipeline as pipeline:
        summaries = pipeline | ExtractBooks(inputs, str(tmp_path / "out"), CONFIG)
        assert_that(
            summaries | beam.Map(lambda s: (s["counts"]["documents"], s["rejected"])),
            equal_to([(1, {"not_text": 1})]),
        )
    (story,) = documents(tmp_path / "out").values()
    assert story["id"] == "books/story"
    assert story["sentences"] == [
        "The river ran north past the old town, where the railway had been built early.",
        "In winter the lake froze over and people crossed it on foot.",
    ]


def test_real_books_end_to_end(tmp_path: Path, books_dir: Path) -> None:
    out = tmp_path / "out"
    assert books.run(["--input", str(books_dir / "*.txt"), "--output", str(out)]) == 0
    manifest = read_manifest(str(out))
    assert manifest.counts["documents"] == 4
    assert manifest.counts["gutenberg_boilerplate_removed"] == 2  # plrabn12 and lcet10
    # lcet10's programme, directory of participants, lists and contents (tests/test_nonprose.py)
    dropped = {k: v for k, v in manifest.counts.items() if k.endswith("_dropped")}
    assert dropped == {
        "list_items_dropped": 65,
        "name_lists_dropped": 94,
        "schedule_entries_dropped": 20,
    }
    assert manifest.counts["control_characters_removed"] == 3  # DOS end-of-file bytes
    assert manifest.rejected == {} and manifest.dropped == {}
    docs = documents(out)
    assert sorted(docs) == ["books/alice29", "books/asyoulik", "books/lcet10", "books/plrabn12"]
    assert docs["books/plrabn12"]["title"] == "Paradise Lost"
    assert docs["books/alice29"]["sentences"][0].startswith(
        "Alice was beginning to get very tired of sitting by her sister on the bank"
    )
    assert docs["books/asyoulik"]["sentences"][0].startswith("As I remember, Adam")
    text = " ".join(s for d in docs.values() for s in d["sentences"])
    assert "Project Gutenberg" not in text and "SMALL PRINT" not in text
    assert "\r" not in text and "  " not in text


def test_compressed_books_give_the_same_document(tmp_path: Path, books_dir: Path) -> None:
    data = (books_dir / "alice29.txt").read_bytes()
    for folder, name, payload in [
        ("plain", "alice29.txt", data),
        ("gz", "alice29.txt.gz", gzip.compress(data)),
        ("bz2", "alice29.txt.bz2", bz2.compress(data)),
    ]:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_bytes(payload)
    out = tmp_path / "out"
    assert books.run(["--input", str(tmp_path / "*" / "alice29.txt*"), "--output", str(out)]) == 0
    docs = documents(out)
    assert sorted(docs) == ["books/bz2/alice29", "books/gz/alice29", "books/plain/alice29"]
    assert docs["books/gz/alice29"]["sentences"] == docs["books/plain/alice29"]["sentences"]
    assert docs["books/bz2/alice29"]["sentences"] == docs["books/plain/alice29"]["sentences"]


def test_bad_book_files(tmp_path: Path, books_dir: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    (tmp_path / "latin.txt").write_bytes(b"\x93Caf\xe9 au lait\x94 was served to the guests.\n")
    truncated = gzip.compress((books_dir / "alice29.txt").read_bytes())
    (tmp_path / "cut.txt.gz").write_bytes(truncated[: len(truncated) // 2])
    shutil.copy(books_dir / "alice29.txt", tmp_path / "alice29.txt")
    out = tmp_path / "out"

    code = books.run(["--input", str(tmp_path / "*.txt*"), "--output", str(out)])

    assert code == 1  # the truncated .gz could not be read to its end
    manifest = read_manifest(str(out))
    assert manifest.rejected == {"not_text": 2, "truncated_input": 1}
    assert manifest.counts["decoded_with_fallback"] == 1
    assert [Path(f["input"]).name for f in manifest.failed_inputs] == ["cut.txt.gz"]
    docs = documents(out)
    assert sorted(docs) == ["books/alice29", "books/latin"]
    assert docs["books/latin"]["sentences"] == ["“Café au lait” was served to the guests."]
    rejects = {
        Path(r["input"]).name: r
        for path in (out / REJECTS_DIR).glob("*.jsonl")
        for r in map(json.loads, path.read_text().splitlines())
    }
    assert rejects["empty.txt"]["error"] == "file is empty"
    assert rejects["binary.txt"]["error"].startswith("looks binary")
    assert "cannot be read to its end" in rejects["cut.txt.gz"]["error"]
    assert "the gzip data ends inside a stream" in rejects["cut.txt.gz"]["error"]
    assert rejects["cut.txt.gz"]["position"].startswith("compressed byte ")


def test_lines_format(tmp_path: Path) -> None:
    (tmp_path / "with_blanks.txt").write_text("First book one.\nFirst book two.\n\nSecond book.\n")
    (tmp_path / "no_blanks.txt").write_text("".join(f"Sentence {i}.\n" for i in range(5)))
    out = tmp_path / "out"
    args = ["--input", str(tmp_path / "*.txt"), "--output", str(out), "--format", "lines"]
    assert books.run([*args, "--lines_per_document", "2"]) == 0
    docs = {k: v["sentences"] for k, v in documents(out).items()}
    assert docs == {
        "bookcorpus/with_blanks/0": ["First book one.", "First book two."],
        "bookcorpus/with_blanks/1": ["Second book."],
        "bookcorpus/no_blanks/0": ["Sentence 0.", "Sentence 1."],
        "bookcorpus/no_blanks/1": ["Sentence 2.", "Sentence 3."],
        "bookcorpus/no_blanks/2": ["Sentence 4."],
    }


def rejects_of(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((out / REJECTS_DIR).glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


LONG_LINE_ERROR = (
    "line 3 is 3145728 bytes, over the 65536-byte line limit (--max_line_kb): no sentence is "
    "that long; the line is skipped, the rest kept"
)


def test_lines_format_rejects_a_huge_line_and_keeps_the_rest(tmp_path: Path) -> None:
    # A 3 MiB line between sentences, plain and compressed, against a 64 KiB limit.
    text = b"First one.\nSecond one.\n" + b"q" * (3 << 20) + b"\nThird one.\nFourth one.\n"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "plain.txt").write_bytes(text)
    (tmp_path / "in" / "packed.txt.gz").write_bytes(gzip.compress(text))
    (tmp_path / "in" / "squeezed.txt.bz2").write_bytes(bz2.compress(text))
    out = tmp_path / "out"
    args = ["--input", str(tmp_path / "in" / "*"), "--output", str(out), "--format", "lines"]
    assert books.run([*args, "--max_line_kb", "64"]) == 0  # a rejected line fails no input
    docs = {k: v["sentences"] for k, v in documents(out).items()}
    # The line ends its document: the sentences either side of it were not adjacent.
    assert docs == {
        f"bookcorpus/{name}/{number}": sentences
        for name in ("plain", "packed", "squeezed")
        for number, sentences in enumerate(
            [["First one.", "Second one."], ["Third one.", "Fourth one."]]
        )
    }
    manifest = read_manifest(str(out))
    assert manifest.rejected == {"line_too_long": 3}
    assert manifest.config["max_line_bytes"] == 64 << 10
    assert sorted(
        (Path(r["input"]).name, r["position"], r["reason"], r["error"], r["id"])
        for r in rejects_of(out)
    ) == [
        (name, "line 3", "line_too_long", LONG_LINE_ERROR, None)
        for name in ("packed.txt.gz", "plain.txt", "squeezed.txt.bz2")
    ]


def test_lines_format_memory_is_bounded_by_the_line_limit(tmp_path: Path) -> None:
    # 32 MiB of one line (a 256 MiB one took 2.8 GB), as gzip members of 1 MiB each.
    mebibyte = gzip.compress(b"q" * (1 << 20))
    path = tmp_path / "huge.txt.gz"
    path.write_bytes(gzip.compress(b"Before.\n") + mebibyte * 32 + gzip.compress(b"\nAfter.\n"))
    config = replace(CONFIG, format="lines", max_line_kb=64)
    tally = UnitTally("00000")
    tracemalloc.start()
    found = [d.sentences for d in line_file_documents(str(path), "huge", config, tally)]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert found == [("Before.",), ("After.",)]
    assert peak < 8 << 20, peak
    (reject,) = tally.rejects
    assert (reject.reason, reject.position, reject.id) == ("line_too_long", "line 2", None)
    assert reject.error.startswith("line 2 is 33554432 bytes, over the 65536-byte line limit")
    assert tally.counts["input_bytes"] == (32 << 20) + len(b"Before.\n\nAfter.\n")


def test_book_sentences_cuts_one_over_the_examples_bound_and_counts_it() -> None:
    # 19,999 characters without a full stop: cut after the space at 16,379 (the last one in
    # the first 16,384), each piece stripped as every sentence is.
    tally = UnitTally("00000")
    paragraphs = ["The river ran north. It froze over.", ("word " * 4000).strip()]
    assert book_sentences(paragraphs, tally) == [
        "The river ran north.",
        "It froze over.",
        ("word " * 3276).strip(),
        ("word " * 724).strip(),
    ]
    assert tally.counts == {"sentences_cut": 1}
    assert book_sentences(["x" * 16_384], tally) == ["x" * 16_384]  # at the bound: whole
    assert tally.counts == {"sentences_cut": 1}


def test_files_format_rejects_a_huge_line_and_keeps_the_book(tmp_path: Path) -> None:
    story = STORY.replace("\n\n", "\n\n" + "q" * (3 << 20) + "\n\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "story.txt.gz").write_bytes(gzip.compress(story.encode()))
    out = tmp_path / "out"
    args = ["--input", str(tmp_path / "in" / "*"), "--output", str(out), "--max_line_kb", "64"]
    assert books.run(args) == 0
    assert documents(out)["books/story"]["sentences"] == [
        "The river ran north past the old town, where the railway had been built early.",
        "In winter the lake froze over and people crossed it on foot.",
    ]
    (reject,) = rejects_of(out)
    assert reject == {
        "id": "books/story",
        "input": str(tmp_path / "in" / "story.txt.gz"),
        "position": "line 4",
        "reason": "line_too_long",
        "error": LONG_LINE_ERROR.replace("line 3 ", "line 4 "),
    }
    assert read_manifest(str(out)).rejected == {"line_too_long": 1}


@pytest.mark.parametrize(
    ("path", "root", "name"),
    [
        ("/data/gutenberg/alice29.txt.gz", "/data", "gutenberg/alice29"),
        ("/data/alice29.txt", "/data", "alice29"),
        ("gs://bucket/books/a.txt.bz2", "gs://bucket", "books/a"),
    ],
)
def test_book_names(path: str, root: str, name: str) -> None:
    assert book_name(path, root) == name


def test_common_root_keeps_the_scheme() -> None:
    assert common_root(["gs://b/x/1.txt", "gs://b/y/2.txt"]) == "gs://b"
    assert common_root(["/d/a.txt"]) == "/d"


def test_units_are_fixed_by_the_inputs() -> None:
    inputs = [{"path": f"/b/{i}.txt", "bytes": 40} for i in range(5)]
    assert plan_units(inputs, unit_bytes=100) == [
        (0, ["/b/0.txt", "/b/1.txt"]),
        (1, ["/b/2.txt", "/b/3.txt"]),
        (2, ["/b/4.txt"]),
    ]
