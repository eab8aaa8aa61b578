"""`bertkit corpus` on records and names that are not text (issue 37 items 4 and 5): each
bad record is one reject with its reason, each bad name one refusal before any work, and a
JSON array, however it is laid out, is the one `json_array` failure."""

from __future__ import annotations

import bz2
import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import zstandard

from pipelines import corpus
from pipelines.beam.documents import read_manifest
from schemas import REJECTS_DIR

RECORDS = [
    {"id": "a", "text": "The river runs past the old mill every spring."},
    {"id": "b", "text": "A second record has a sentence of its own here."},
]


def run(path: Path, out: Path, *flags: str) -> int:
    return corpus.run(["--input", str(path), "--output", str(out), *flags])


def rejects(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((out / REJECTS_DIR).glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def test_a_lone_surrogate_key_is_shown_escaped_in_its_reject(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"\\ud800k": 1}\n' + json.dumps(RECORDS[0]) + "\n")
    out = tmp_path / "out"
    assert run(src, out) == 0
    ((reject),) = rejects(out)
    assert (reject["position"], reject["reason"]) == ("line 1", "text_missing")
    assert reject["error"] == (
        "no 'text' field (the record's keys: \\ud800k): name the field that holds the text "
        "with --text-field"
    )
    assert read_manifest(str(out)).counts["documents"] == 1


def test_an_input_name_that_is_not_utf8_is_refused_before_any_work(tmp_path, capsys) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "good.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    with open(os.fsencode(src) + b"/bad\xff.jsonl", "wb") as handle:
        handle.write(json.dumps(RECORDS[1]).encode() + b"\n")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        corpus.main(["--input", f"{src}/*.jsonl", "--output", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{src}/bad\\xff.jsonl: the file's name is not UTF-8" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(RECORDS),  # json.dump(records, f): one line
        json.dumps(RECORDS) + "\n",
        "\ufeff  \n" + json.dumps(RECORDS),  # a byte order mark and a blank line first
        json.dumps(RECORDS, indent=2),
    ],
    ids=["compact", "compact-newline", "bom-blank-line", "pretty"],
)
def test_a_json_array_is_refused_however_it_is_laid_out(tmp_path: Path, content: str) -> None:
    src = tmp_path / "array.json"
    src.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    assert run(src, out) == 1
    (failure,) = read_manifest(str(out)).failed_inputs
    assert read_manifest(str(out)).rejected == {"json_array": 1}
    assert "jq -c '.[]' FILE > FILE.jsonl" in failure["error"]
    assert read_manifest(str(out)).counts.get("documents", 0) == 0


def test_a_compact_array_over_the_line_limit_is_still_an_array(tmp_path: Path) -> None:
    src = tmp_path / "array.json"
    records = [{"id": n, "text": "word " * 400} for n in range(200)]  # ~400 KB on one line
    src.write_text(json.dumps(records))
    out = tmp_path / "out"
    assert run(src, out, "--max-line-kb", "64") == 1
    assert len(read_manifest(str(out)).failed_inputs) == 1
    assert read_manifest(str(out)).rejected == {"json_array": 1}


@pytest.mark.parametrize(
    "first",
    ['["id", "text"]', '\ufeff  ["id", "text"]', "[]", "[1, 2]"],
    ids=["header", "bom-header", "empty", "numbers"],
)
def test_a_whole_array_on_the_first_line_then_records_is_json_lines(tmp_path, first) -> None:
    # Before, the whole file was refused (json_array) for its first byte. An array that
    # ends on its line, with records after it, is a bad first record: rejected, the rest kept.
    src = tmp_path / "in.jsonl"
    src.write_text(first + "\n\n" + "".join(json.dumps(r) + "\n" for r in RECORDS))
    out = tmp_path / "out"
    assert run(src, out) == 0
    ((reject),) = rejects(out)
    shown = first.removeprefix("\ufeff")
    assert (reject["position"], reject["reason"], reject["error"]) == (
        "line 1",
        "not_an_object",
        f"the line is an array, not a JSON object ({shown!r})",
    )
    manifest = read_manifest(str(out))
    assert (manifest.counts["documents"], manifest.counts["blank_lines"]) == (2, 1)
    assert manifest.failed_inputs == []


@pytest.mark.parametrize(
    "content",
    ['[1,\n2]\n{"id": "a", "text": "b"}\n', '[{"id": "a", "text": "b"},\n', '\n["id", "text"]\n\n'],
    ids=["goes-on", "cut-short", "only-line"],
)
def test_an_array_that_goes_on_or_is_the_whole_file_is_json_array(tmp_path, content) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(content)
    out = tmp_path / "out"
    assert run(src, out) == 1
    assert read_manifest(str(out)).rejected == {"json_array": 1}


def _raw_strings(values: list[bytes]) -> pa.Array:
    """A string array holding these bytes as they are (pyarrow checks no UTF-8 on writing)."""
    data = b"".join(values)
    ends = [0]
    for value in values:
        ends.append(ends[-1] + len(value))
    offsets = pa.array(ends, pa.int32()).buffers()[1]
    return pa.Array.from_buffers(pa.string(), len(values), [None, offsets, pa.py_buffer(data)])


def test_a_parquet_id_or_title_that_is_not_utf8_is_one_reject(tmp_path: Path) -> None:
    text = RECORDS[0]["text"]
    table = pa.table(
        {
            "id": _raw_strings([b"bad\xff", b"b", b"c"]),
            "text": [text, text, text],
            "title": _raw_strings([b"T", b"Bad \xfe title", b"The  Mill"]),
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    out = tmp_path / "out"
    assert run(tmp_path / "rows.parquet", out, "--title-field", "title") == 0
    assert [(r["position"], r["reason"], r["id"], r["error"]) for r in rejects(out)] == [
        (
            "row 0",
            "invalid_utf8",
            "corpus/rows.parquet:0",
            "'id' is not UTF-8, as a Parquet string must be",
        ),
        ("row 1", "invalid_utf8", "corpus/b", "'title' is not UTF-8, as a Parquet string must be"),
    ]
    manifest = read_manifest(str(out))
    assert (manifest.counts["documents"], manifest.rejected) == (1, {"invalid_utf8": 2})


def test_json_ids_and_titles_over_their_limits_and_titles_made_of_ids(tmp_path: Path) -> None:
    text = RECORDS[0]["text"]
    records = [
        {"id": "i" * 4097, "text": text},
        {"id": "t", "text": text, "title": "w " * 40_000},
        {"id": 10**4096, "text": text},  # 4,097 digits
        {"id": "An\tid  with\tspaces " + "x" * 1100, "text": text},  # a tab is kept
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    assert run(src, out, "--title-field", "title") == 0
    assert [(r["position"], r["reason"], r["id"], r["error"]) for r in rejects(out)] == [
        (
            "line 1",
            "id_too_long",
            "corpus/in.jsonl:1",
            "'id' is 4097 bytes, over the 4096-byte limit for ids",
        ),
        (
            "line 2",
            "title_too_long",
            "corpus/t",
            "'title' is 80000 bytes, over the 65536-byte limit for titles",
        ),
        (
            "line 3",
            "id_too_long",
            "corpus/in.jsonl:3",
            "'id' is 4097 bytes, over the 4096-byte limit for ids",
        ),
    ]
    (title,) = [row["title"] for row in ds.dataset(out).to_table().to_pylist()]
    assert title == ("An id with spaces " + "x" * 1100)[:1000]  # the title's rules


@pytest.mark.parametrize(
    ("name", "compress", "kind", "suffix"),
    [
        ("hidden.jsonl", gzip.compress, "gzip", ".gz"),
        ("hidden.txt.json", bz2.compress, "bzip2", ".bz2"),
        ("hidden.ndjson", zstandard.ZstdCompressor().compress, "zstd", ".zst"),
    ],
)
def test_compressed_bytes_under_a_plain_name_fail_that_file_in_one_line(
    tmp_path: Path, name, compress, kind, suffix
) -> None:
    # Before, each line was an invalid_utf8 reject (hundreds for a real file) and exit 0.
    src = tmp_path / "in"
    src.mkdir()
    data = compress(b"".join(json.dumps(r).encode() + b"\n" for r in RECORDS))
    (src / name).write_bytes(data)
    (src / "ok.JSONL.GZ").write_bytes(gzip.compress(json.dumps(RECORDS[0]).encode() + b"\n"))
    out = tmp_path / "out"
    assert corpus.run(["--input", f"{src}/*", "--output", str(out)]) == 1
    ((reject),) = rejects(out)
    shown = data[:4].hex(" ").upper()
    assert (reject["position"], reject["reason"], reject["error"]) == (
        "byte 0",
        "compressed_data",
        f"{src / name}: its bytes are {kind}-compressed (they start {shown}), but its name "
        f"does not end in {suffix}, so it would be read as text: rename it {name}{suffix}",
    )
    assert read_manifest(str(out)).counts["documents"] == 1  # ok.JSONL.GZ, read as gzip


def test_a_file_compressed_twice_says_so(tmp_path: Path) -> None:
    src = tmp_path / "twice.jsonl.gz"
    src.write_bytes(gzip.compress(gzip.compress(json.dumps(RECORDS[0]).encode() + b"\n")))
    out = tmp_path / "out"
    assert run(src, out) == 1
    ((reject),) = rejects(out)
    assert reject["error"] == (
        f"{src}: once decompressed, its bytes are gzip data again (they start 1F 8B 08 00): "
        "the file is compressed twice: decompress it one time, so that it holds what its name "
        "says"
    )


def test_an_id_with_a_control_character_is_rejected_not_logged_as_it_is(
    tmp_path: Path, caplog
) -> None:
    # Before, the first id forged a log line ("rejected corpus/evil" then a line of its own
    # "ERROR bertkit: forged line …") and the second was kept with its NUL.
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"id": "evil\\nERROR bertkit: forged line", "text": 5}\n'
        '{"id": "nul\\u0000id", "text": "A sentence that has some words."}\n'
        '{"id": "sep\\u2028x", "text": "A sentence that has some words."}\n'
        '{"a\\nERROR b": 1}\n' + json.dumps(RECORDS[0]) + "\n"
    )
    out = tmp_path / "out"
    assert run(src, out) == 0
    assert [(r["id"], r["reason"], r["error"]) for r in rejects(out)] == [
        (
            f"corpus/in.jsonl:{line}",
            "id_control_character",
            f"'id' holds a control character ({control}): an id names its record on one "
            "line (logs, rejects, the documents), so it is rejected, not changed",
        )
        for line, control in [
            (1, "U+000A at character 5"),
            (2, "U+0000 at character 4"),
            (3, "U+2028 at character 4"),
        ]
    ] + [
        (
            "corpus/in.jsonl:4",
            "text_missing",
            "no 'text' field (the record's keys: a\\nERROR b): name the field that holds the "
            "text with --text-field",
        )
    ]
    assert all("\n" not in record.getMessage() for record in caplog.records)
    assert read_manifest(str(out)).counts["documents"] == 1


def test_an_input_name_with_a_control_character_is_refused(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "bad\nERROR x.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    with pytest.raises(SystemExit) as stop:
        corpus.main(["--input", f"{src}/*.jsonl", "--output", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        f"{src}/bad\\nERROR x.jsonl: the file's name holds a control character (U+000A at "
        "character " in err
    )
    assert "rename it or leave it out of --input" in err
