"""`bertkit corpus` on JSON lines that are something else, and on text with control
characters: each reject names what the line is (a string, not null), a pretty-printed file
says so once, a UTF-16 or UTF-32 file fails once naming its encoding and the iconv line, a
float id that holds a whole number is that integer, and no control character reaches a
sentence or a title."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pipelines import corpus
from pipelines.beam.documents import read_manifest
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


def test_a_line_that_is_not_an_object_is_named_for_what_it_is(tmp_path: Path) -> None:
    lines = ['"just a string"', "42", "[1, 2]", "true", "false", "null"]
    records = [json.dumps({"id": "a", "text": TEXT}), *lines]
    (tmp_path / "x.jsonl").write_text("\n".join(records) + "\n")
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out) == 0
    assert [(p, e) for p, _, _, e in rejects(out)] == [
        ("line 2", "the line is a string, not a JSON object ('\"just a string\"')"),
        ("line 3", "the line is a number, not a JSON object ('42')"),
        ("line 4", "the line is an array, not a JSON object ('[1, 2]')"),
        ("line 5", "the line is a boolean (true), not a JSON object ('true')"),
        ("line 6", "the line is a boolean (false), not a JSON object ('false')"),
        ("line 7", "the line is null, not a JSON object ('null')"),
    ]


def test_a_pretty_printed_file_says_so_once(tmp_path: Path) -> None:
    records = [{"id": "x", "text": TEXT}, {"id": "y", "text": TEXT}]
    (tmp_path / "x.json").write_text("".join(json.dumps(r, indent=2) + "\n" for r in records))
    out = tmp_path / "out"
    assert run(tmp_path / "x.json", out) == 1  # every line rejected: nothing kept
    found = rejects(out)
    assert [(p, r) for p, r, _, _ in found] == [(f"line {n}", "not_json") for n in range(1, 9)]
    assert found[0][3] == (
        "not JSON: Expecting property name enclosed in double quotes at column 2; the file "
        "looks like pretty-printed JSON (a { alone on line 1: an object over many lines), not "
        "JSON lines (one object a line): write it as JSON lines, e.g. jq -c . FILE > "
        "FILE.jsonl (jq -c '.KEY[]' where the records are an array under KEY)"
    )
    assert found[4][3] == "not JSON: Expecting property name enclosed in double quotes at column 2"
    assert sum("pretty-printed" in error for _, _, _, error in found) == 1


LINES = "".join(json.dumps({"id": n, "text": f"{TEXT} Record {n}."}) + "\n" for n in range(3))


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_its_mark_is_read_as_utf8(tmp_path: Path, encoding: str) -> None:
    # As `bertkit books` and `bertkit wikipedia` read it: converted as it streams.
    (tmp_path / "x.jsonl").write_bytes(("\ufeff" + LINES).encode(encoding))
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out) == 0
    assert documents(out) == {f"corpus/{n}": (str(n), [TEXT, f"Record {n}."]) for n in range(3)}
    assert (rejects(out), read_manifest(str(out)).counts["records"]) == ([], 3)


UTF16 = ("\ufeff" + LINES).encode("utf-16-le")


def test_utf16_with_a_lone_surrogate_fails_there_after_the_lines_before(tmp_path) -> None:
    third = 2 + 2 * LINES.index("Record 2")  # its byte in the file, after the 2-byte mark
    (tmp_path / "x.jsonl").write_bytes(UTF16[:third] + b"\x00\xd8" + UTF16[third + 2 :])
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out) == 1
    assert rejects(out) == [
        (
            f"decompressed byte {third}",
            "corrupt_input",
            None,
            f"cannot be read to its end: {tmp_path / 'x.jsonl'}: not UTF-16LE as its byte "
            "order mark says (illegal UTF-16 surrogate): the file is damaged at decompressed "
            f"byte {third}",
        )
    ]
    assert sorted(documents(out)) == ["corpus/0", "corpus/1"]


def test_utf16_cut_inside_a_character_keeps_every_line(tmp_path) -> None:
    (tmp_path / "x.jsonl").write_bytes(UTF16 + b"x")
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out) == 1
    assert rejects(out) == [
        (
            f"decompressed byte {len(UTF16)}",
            "truncated_input",
            None,
            f"cannot be read to its end: {tmp_path / 'x.jsonl'}: not UTF-16LE as its byte "
            "order mark says (truncated data): the file is cut short at decompressed byte "
            f"{len(UTF16)}",
        )
    ]
    assert sorted(documents(out)) == ["corpus/0", "corpus/1", "corpus/2"]


@pytest.mark.parametrize(
    ("encoding", "mark", "said"),
    [
        (
            "UTF-16LE",
            False,
            "UTF-16LE (its first bytes are 7B 00 22 00), and JSON lines are UTF-8 (or UTF-16 "
            "with its byte order mark): convert it, e.g. iconv -f UTF-16LE ",
        ),
        (
            "UTF-16BE",
            False,
            "UTF-16BE (its first bytes are 00 7B 00 22), and JSON lines are UTF-8 (or UTF-16 "
            "with its byte order mark): convert it, e.g. iconv -f UTF-16BE ",
        ),
        (
            "UTF-32LE",
            True,
            "UTF-32LE (it starts with the byte order mark FF FE 00 00), and JSON lines are "
            "UTF-8 (or UTF-16 with its byte order mark): convert it, e.g. iconv -f UTF-32 ",
        ),
        (
            "UTF-32BE",
            True,
            "UTF-32BE (it starts with the byte order mark 00 00 FE FF), and JSON lines are "
            "UTF-8 (or UTF-16 with its byte order mark): convert it, e.g. iconv -f UTF-32 ",
        ),
    ],
)
def test_utf16_without_its_mark_and_utf32_fail_the_file_once(tmp_path, encoding, mark, said):
    (tmp_path / "x.jsonl").write_bytes((("\ufeff" if mark else "") + LINES).encode(encoding))
    out = tmp_path / "out"
    assert run(tmp_path / "x.jsonl", out) == 1
    assert rejects(out) == [
        (
            "line 1",
            "unsupported_encoding",
            None,
            f"{tmp_path / 'x.jsonl'}: is {said}-t UTF-8 FILE > FILE.jsonl (decompressed first)",
        )
    ]
    assert "records" not in read_manifest(str(out)).counts


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


def test_a_raw_control_character_in_a_string_is_said_as_such(tmp_path: Path) -> None:
    # Before: "not JSON: Invalid control character at column 18", which reads as damage.
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"id": "a", "text": "tab\there and more words"}\n'
        b'{"id": "b", "text": "nul\x00here"}\n'
        b'{"id": "c", "text": "A good record of several words."}\n'
    )
    out = tmp_path / "out"
    assert corpus.run(["--input", str(src), "--output", str(out)]) == 0
    assert rejects(out) == [
        (
            f"line {line}",
            "not_json",
            None,
            f"not JSON: a raw control character ({code}) inside a string at column {column}, "
            "which JSON forbids unescaped (\\t, \\n, \\u0000 are the escapes): rewrite the "
            "file with a JSON writer that escapes them; the record is skipped",
        )
        for line, code, column in [(1, "U+0009", 25), (2, "U+0000", 25)]
    ]
    assert read_manifest(str(out)).counts["documents"] == 1
