"""`bertkit corpus` on float ids and text with control characters: a float id that holds a
whole number is that integer, and no control character reaches a sentence or a title."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds

from pipelines import corpus
from pipelines.text.corpustext import record_paragraphs
from schemas import REJECTS_DIR

TEXT = "The river runs past the old mill every spring."


def run(path: Path, out: Path, *flags: str) -> int:
    return corpus.run(["--input", str(path), "--output", str(out), *flags])


def rejects(out: Path) -> list[tuple[str, str, str | None, str]]:
    return [
        (r["position"], r["reason"], r["id"], r["error"])
        for path in sorted((out / REJECTS_DIR).glob("*.jsonl"))
        for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    ]


def documents(out: Path) -> dict[str, tuple[str, list[str]]]:
    rows = ds.dataset(out).to_table().to_pylist()
    return {row["id"]: (row["title"], row["sentences"]) for row in rows}


def test_float_ids_that_hold_whole_numbers_are_those_integers(tmp_path: Path) -> None:
    # pandas' to_json writes an integer column with nulls as floats: 7.0, NaN.
    ids = ["7.0", "7", "NaN", "1.5", "1e300", "Infinity"]  # as Python's json writes them
    lines = [f'{{"id": {value}, "text": "{TEXT}"}}' for value in ids]
    (tmp_path / "x.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out) == 0
    ids = ds.dataset(out).to_table(columns=["id"]).column("id").to_pylist()
    assert ids == ["corpus/7", "corpus/7", "corpus/x.jsonl:3"]  # 7.0 is the id 7 as 7 is
    assert rejects(out) == [
        (
            "line 4",
            "id_not_string_or_int",
            "corpus/x.jsonl:4",
            "'id' is a number, not a string or an integer (1.5, not a whole number)",
        ),
        (
            "line 5",
            "id_not_string_or_int",
            "corpus/x.jsonl:5",
            "'id' is a number, not a string or an integer (1e+300, past 2**53, where a float "
            "no longer holds every integer)",
        ),
        (
            "line 6",
            "id_not_string_or_int",
            "corpus/x.jsonl:6",
            "'id' is a number, not a string or an integer (inf)",
        ),
    ]


def test_control_characters_are_removed_and_separators_are_spaces() -> None:
    text = (
        "Control chars \x00 NUL and \x1b ESC and \x07 BEL in the text here.\n\n"
        "Joined\x00up wo\x7frds and C1\x9b controls\x80 go.\n\n"
        "Fields\x1fsplit\x1eby\x1dseparators\x85and NEL here.\n\n"
        "\x00\x01\x02 \x03"
    )
    assert list(record_paragraphs(text)) == [
        "Control chars NUL and ESC and BEL in the text here.",
        "Joinedup words and C1 controls go.",
        "Fields split by separators and NEL here.",
    ]


def test_no_control_character_reaches_a_sentence_or_a_title(tmp_path: Path) -> None:
    record = {
        "id": "ctl",
        "text": "Control chars \x00 NUL and \x1b ESC and \x07 BEL in the text here.",
        "title": "A\x00 title\x1b[1m with\tcontrols\x9c",
    }
    (tmp_path / "x.jsonl").write_text(json.dumps(record) + "\n")
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out, "--title-field", "title") == 0
    assert documents(out) == {
        "corpus/ctl": (
            "A title[1m with controls",
            ["Control chars NUL and ESC and BEL in the text here."],
        )
    }
