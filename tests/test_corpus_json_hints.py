"""`bertkit corpus` on float ids: a float that holds a whole number (pandas writes an integer
column with nulls as floats, and its to_json writes 7.0) is that integer's id."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds

from pipelines import corpus
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
