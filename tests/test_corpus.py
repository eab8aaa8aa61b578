"""The corpus stage: JSON lines and Parquet records → documents, every reject, the real sample.

Every input is a real file written by its real library at test time (json + gzip, zstandard,
pyarrow), or the `datasets` fixtures in tests/data/corpus/ (see the README there).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import tracemalloc
from dataclasses import replace
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.testing.util import assert_that, equal_to

from pipelines import corpus, examples, vocab
from pipelines.beam.documents import (
    HELD_REJECTS,
    UnitTally,
    finish_unit,
    read_manifest,
)
from pipelines.beam.inputs import expand_inputs
from pipelines.corpus import (
    CorpusConfig,
    CorpusInputError,
    ExtractCorpus,
    field_value,
    input_kind,
    jsonl_documents,
    record_file_name,
)
from pipelines.text.corpustext import ParagraphCounts, record_paragraphs
from schemas import REJECTS_DIR, Reject
from tests.conftest import s3_flags

FIXTURES = Path(__file__).resolve().parent / "data" / "corpus"
CONFIG = CorpusConfig(input=("c/*.jsonl",), output="out")  # the flags' defaults

RIVER = (
    "The river ran north past the old town.\r\nIt had been built early.\n \n"
    "In winter the lake froze over and people crossed it on foot."
)
RIVER_SENTENCES = [
    "The river ran north past the old town.",
    "It had been built early.",
    "In winter the lake froze over and people crossed it on foot.",
]
VISIT = "Dr. Smith arrived at noon. He left at three o'clock."
VISIT_SENTENCES = ["Dr. Smith arrived at noon.", "He left at three o'clock."]
RECORDS = [
    {"id": "r-1", "text": RIVER, "meta": {"title": "The  River"}},
    {"id": 2, "text": VISIT},
    {"text": "Home\n\nA record without an id keeps its place in the file."},
]


def jsonl(records: list) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def documents(directory: Path) -> dict[str, dict]:
    return {row["id"]: row for row in ds.dataset(directory).to_table().to_pylist()}


def rejects_of(out: Path) -> list[tuple[str, str, str, str | None]]:
    """(input file name, position, reason, id) of every reject, sorted."""
    return sorted(
        (Path(r["input"]).name, r["position"], r["reason"], r["id"])
        for path in (out / REJECTS_DIR).glob("*.jsonl")
        for r in map(json.loads, path.read_text().splitlines())
    )


def inputs_dir(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir(exist_ok=True)
    return tmp_path / "in"


def run(inputs, out: Path, *flags: str) -> int:
    patterns = [inputs] if isinstance(inputs, str | Path) else inputs
    args = [arg for pattern in patterns for arg in ("--input", str(pattern))]
    return corpus.run([*args, "--output", str(out), *flags])


# --- the text rules, on literal input -------------------------------------------------------


def test_record_paragraphs_follow_the_rules() -> None:
    counts = ParagraphCounts()
    text = "One two three.\r\nFour five.\r\n\r\nShare\n\t \nA  second\u00a0paragraph here.\rEnd"
    assert list(record_paragraphs(text, 3, counts)) == [
        "One two three. Four five.",
        "A second paragraph here. End",
    ]
    assert counts == ParagraphCounts(short=1, cut=0)
    # "--" and "*" hold no letter or digit: not words; min_words 0 keeps everything.
    assert list(record_paragraphs("-- * --\n\nWords, words, words.", 2, counts)) == [
        "Words, words, words."
    ]
    assert list(record_paragraphs("一二三\n\nok", 0)) == ["一二三", "ok"]


def test_fields_nested_and_dotted() -> None:
    record = {"text": "t", "meta": {"title": "T", "inner": {"n": 1}}, "a.b": "key with dot"}
    assert field_value(record, "text") == "t"
    assert field_value(record, "meta.title") == "T"
    assert field_value(record, "meta.inner.n") == 1
    assert field_value(record, "a.b") == "key with dot"  # the key itself wins
    assert field_value(record, "meta.missing") is corpus.reading.MISSING
    assert field_value(record, "text.x") is corpus.reading.MISSING


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("a.jsonl", "jsonl"),
        ("a.JSONL.ZST", "jsonl"),
        ("a.json.gz", "jsonl"),
        ("a.ndjson.bz2", "jsonl"),
        ("s3://b/train-00000-of-00002.parquet", "parquet"),
    ],
)
def test_input_kinds(path: str, kind: str) -> None:
    assert input_kind(path) == kind


def test_other_files_are_refused_before_any_work(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    (src / "a.jsonl").write_bytes(jsonl(RECORDS))
    (src / "notes.csv").write_text("id,text\n")
    with pytest.raises(CorpusInputError, match=r"notes\.csv: not a JSON lines or Parquet file"):
        run(src / "*", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_record_file_names() -> None:
    assert record_file_name("/d/c4/en/part-1.jsonl.zst", "/d/c4") == "en/part-1.jsonl.zst"
    assert record_file_name("gs://b/x/a.parquet", "gs://b/x") == "a.parquet"


# --- the transform and the command -----------------------------------------------------------


def test_extract_corpus_transform(tmp_path: Path, test_pipeline) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(jsonl(RECORDS))
    inputs = expand_inputs([str(tmp_path / "in" / "*.jsonl")])
    config = replace(CONFIG, title_field="meta.title", source="web")
    with test_pipeline as pipeline:
        summaries = pipeline | ExtractCorpus(inputs, str(tmp_path / "out"), config)
        assert_that(
            summaries | beam.Map(lambda s: (s["counts"]["documents"], s["counts"]["records"])),
            equal_to([(3, 3)]),
        )
    docs = documents(tmp_path / "out")
    assert {k: (v["title"], v["sentences"], v["source"]) for k, v in docs.items()} == {
        "web/r-1": ("The River", RIVER_SENTENCES, "web"),
        "web/2": ("2", VISIT_SENTENCES, "web"),
        "web/a.jsonl:3": (
            "a.jsonl:3",
            ["A record without an id keeps its place in the file."],
            "web",
        ),
    }


def test_plain_gzip_bz2_and_zstd_give_the_same_documents(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    data = jsonl(RECORDS)
    frames = zstandard.ZstdCompressor(write_checksum=True)
    multi_frame = b"".join(frames.compress(line + b"\n") for line in data.splitlines())
    for name, payload in [
        ("plain.jsonl", data),
        ("packed.jsonl.gz", gzip.compress(data)),
        ("squeezed.ndjson.bz2", bz2.compress(data)),
        ("framed.jsonl.zst", multi_frame),  # one zstd frame a line
    ]:
        (src / name).write_bytes(payload)
    out = tmp_path / "out"
    assert run(src / "*.*", out, "--source", "mix") == 0
    sentences = {k: v["sentences"] for k, v in documents(out).items()}
    for name in ("plain.jsonl", "packed.jsonl.gz", "squeezed.ndjson.bz2", "framed.jsonl.zst"):
        assert sentences.pop(f"mix/{name}:3") == [
            "A record without an id keeps its place in the file."
        ]
    assert sentences == {"mix/r-1": RIVER_SENTENCES, "mix/2": VISIT_SENTENCES}  # 4 × the same
    manifest = read_manifest(str(out))
    assert manifest.counts["documents"] == 12 and manifest.counts["records"] == 12
    assert manifest.counts["input_bytes"] == 4 * len(data)  # decompressed JSON lines
    assert manifest.counts["paragraphs_short"] == 4  # "Home", once a file
    assert manifest.rejected == {} and manifest.failed_inputs == []


BAD_LINES = [
    b'{"id": "ok", "text": "A good record stays in the output."}',
    b"not json at all",
    b'["an", "array"]',
    b'{"id": "a", "body": "no text field"}',
    b'{"id": "b", "text": null}',
    b'{"id": "c", "text": 42}',
    b'{"id": [1], "text": "an id that is a list"}',
    b'{"id": true, "text": "an id that is a boolean"}',
    b'{"id": "", "text": "an id that is empty"}',
    b'{"id": "d", "text": "caf\xe9 in Latin-1"}',
    b'{"id": "e", "text": "half a pair \\ud83d here"}',
    b'{"id": "f", "text": "' + b"w " * 40_000 + b'"}',
    b"   ",
    b'{"id": "g", "text": "Short."}',
    b'{"id": "h", "text": "Title as a number.", "title": 7}',
    b'{"id": "i", "text": "The last good record is kept too."}',
]


def test_every_reject_reason_with_file_and_line(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    (src / "bad.jsonl").write_bytes(b"\n".join(BAD_LINES) + b"\n")
    out = tmp_path / "out"
    flags = ("--max-line-kb", "64", "--title-field", "title")
    assert run(src / "bad.jsonl", out, *flags) == 0  # bad records fail no input
    assert {k: v["sentences"] for k, v in documents(out).items()} == {
        "corpus/ok": ["A good record stays in the output."],
        "corpus/i": ["The last good record is kept too."],
    }
    assert rejects_of(out) == sorted(
        [
            ("bad.jsonl", "line 2", "not_json", None),
            ("bad.jsonl", "line 3", "not_an_object", None),
            ("bad.jsonl", "line 4", "text_missing", "corpus/a"),
            ("bad.jsonl", "line 5", "text_missing", "corpus/b"),
            ("bad.jsonl", "line 6", "text_not_string", "corpus/c"),
            ("bad.jsonl", "line 7", "id_not_string_or_int", "corpus/bad.jsonl:7"),
            ("bad.jsonl", "line 8", "id_not_string_or_int", "corpus/bad.jsonl:8"),
            ("bad.jsonl", "line 9", "id_empty", "corpus/bad.jsonl:9"),
            ("bad.jsonl", "line 10", "invalid_utf8", None),
            ("bad.jsonl", "line 11", "lone_surrogate", None),
            ("bad.jsonl", "line 12", "line_too_long", None),
            ("bad.jsonl", "line 15", "title_not_string", "corpus/h"),
        ]
    )
    manifest = read_manifest(str(out))
    assert manifest.dropped == {"no_text": 1}  # "Short.": one word, under 3
    # Every record counted once, the line over the limit too: 2 documents + 1 drop + 12
    # rejects (before, 14: line_too_long was left out).
    assert manifest.counts["blank_lines"] == 1 and manifest.counts["records"] == 15
    assert (
        manifest.counts["documents"]
        + sum(manifest.dropped.values())
        + sum(manifest.rejected.values())
        == 15
    )
    errors = {
        r["position"]: r["error"]
        for r in map(
            json.loads, (out / REJECTS_DIR / "rejects-00000.jsonl").read_text().splitlines()
        )
    }
    assert errors["line 2"] == "not JSON: Expecting value at column 1"
    assert errors["line 4"] == (
        "no 'text' field (the record's keys: id, body): name the field that holds the text "
        "with --text-field"
    )
    assert errors["line 5"].startswith("a null 'text' field")
    assert errors["line 6"] == "'text' is a number, not a string"
    assert errors["line 10"] == (
        "byte 24 of the line is not UTF-8 (invalid continuation byte): JSON lines are UTF-8"
    )
    assert errors["line 12"] == (
        "line 12 is 80023 bytes, over the 65536-byte limit (--max-line-kb): the record is "
        "skipped, the rest kept"
    )


def test_a_json_array_file_fails_in_one_line(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    (src / "array.json").write_text(json.dumps(RECORDS, indent=2))
    out = tmp_path / "out"
    assert run(src / "array.json", out) == 1
    (failure,) = read_manifest(str(out)).failed_inputs
    assert "holds one JSON array, not JSON lines" in failure["error"]
    assert rejects_of(out) == [("array.json", "line 1", "json_array", None)]


def test_a_truncated_zstd_file_keeps_what_came_before_and_exits_1(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    records = [
        {"id": n, "text": f"Record number {n} has a sentence of its own."} for n in range(5000)
    ]
    data = zstandard.ZstdCompressor().compress(jsonl(records))
    (src / "cut.jsonl.zst").write_bytes(data[: len(data) // 2])
    (src / "whole.jsonl").write_bytes(jsonl([{"id": "w", "text": VISIT}]))
    out = tmp_path / "out"
    assert run(src / "*", out) == 1
    manifest = read_manifest(str(out))
    assert [Path(f["input"]).name for f in manifest.failed_inputs] == ["cut.jsonl.zst"]
    assert manifest.rejected == {"truncated_input": 1}
    docs = documents(out)
    assert docs.pop("corpus/w")["sentences"] == VISIT_SENTENCES  # the other file is whole
    # every record decompressed before the cut, and none after it
    assert sorted(int(k.removeprefix("corpus/")) for k in docs) == list(range(len(docs)))
    assert 1000 < len(docs) < 5000
    assert rejects_of(out) == [
        ("cut.jsonl.zst", f"compressed byte {len(data) // 2}", "truncated_input", None)
    ]


def test_a_huge_line_is_measured_not_held(tmp_path: Path) -> None:
    # A 32 MiB line between two records, as zstd frames of 1 MiB each.
    frame = zstandard.ZstdCompressor().compress(b"q" * (1 << 20))
    path = tmp_path / "huge.jsonl.zst"
    before = zstandard.ZstdCompressor().compress(jsonl([{"text": "Before the long line here."}]))
    after = zstandard.ZstdCompressor().compress(
        b"\n" + jsonl([{"text": "After the long line here."}])
    )
    path.write_bytes(before + frame * 32 + after)
    config = replace(CONFIG, max_line_kb=64)
    tally = UnitTally("00000")
    tracemalloc.start()
    found = [(d.id, d.sentences) for d in jsonl_documents(str(path), "huge", config, tally)]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert found == [
        ("corpus/huge:1", ("Before the long line here.",)),
        ("corpus/huge:3", ("After the long line here.",)),
    ]
    assert peak < 8 << 20, peak
    (reject,) = tally.rejects
    assert (reject.reason, reject.position) == ("line_too_long", "line 2")


# --- Parquet -------------------------------------------------------------------------------


def test_parquet_by_pyarrow(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    table = pa.table(
        {
            "doc_id": pa.array([10, 11, None, 13, 14], pa.int64()),
            "body": [RIVER, VISIT, "A row without an id is named by its row.", None, "x" * 3000],
            "meta": [{"title": "River"}, {"title": None}, None, {"title": "T"}, {"title": "X"}],
            "unread": ["this column is never read"] * 5,
        }
    )
    pq.write_table(table, src / "rows.parquet", row_group_size=2)
    out = tmp_path / "out"
    flags = ("--text-field", "body", "--id-field", "doc_id", "--title-field", "meta.title")
    assert run(src / "rows.parquet", out, *flags, "--max-line-kb", "2") == 0
    docs = documents(out)
    assert {k: (v["title"], v["sentences"]) for k, v in docs.items()} == {
        "corpus/10": ("River", RIVER_SENTENCES),
        "corpus/11": ("11", VISIT_SENTENCES),
        "corpus/rows.parquet:2": (
            "rows.parquet:2",
            ["A row without an id is named by its row."],
        ),
    }
    assert rejects_of(out) == [
        ("rows.parquet", "row 3", "text_missing", "corpus/13"),
        ("rows.parquet", "row 4", "text_too_long", None),
    ]
    # 3 documents + 2 rejects, text_too_long too (before, 4: it was left out)
    assert read_manifest(str(out)).counts["records"] == 5


def test_parquet_without_an_id_column_and_with_bad_utf8(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    data = b"A first row of running text.Bad \xff\xfe bytes in this row."
    offsets = pa.array([0, 28, len(data)], pa.int32()).buffers()[1]
    text = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(data)])
    pq.write_table(pa.table({"text": text}), src / "raw.parquet")  # pyarrow checks none
    out = tmp_path / "out"
    assert run(src / "raw.parquet", out) == 0
    assert {k: v["sentences"] for k, v in documents(out).items()} == {
        "corpus/raw.parquet:0": ["A first row of running text."]
    }
    assert rejects_of(out) == [("raw.parquet", "row 1", "invalid_utf8", None)]


@pytest.mark.parametrize(
    ("table", "flags", "reason", "message"),
    [
        (
            pa.table({"content": ["a b c"]}),
            (),
            "text_missing",
            "no column 'text' (its columns: content)",
        ),
        (pa.table({"text": [1]}), (), "text_not_string", "column 'text' holds int64, not strings"),
        (
            pa.table({"text": ["a"], "id": [True]}),
            (),
            "id_not_string_or_int",
            "column 'id' holds bool, not strings, integers or floats",
        ),
    ],
)
def test_parquet_columns_that_do_not_fit_fail_the_file(tmp_path, table, flags, reason, message):
    src = inputs_dir(tmp_path)
    pq.write_table(table, src / "x.parquet")
    out = tmp_path / "out"
    assert run(src / "x.parquet", out, *flags) == 1
    assert rejects_of(out) == [("x.parquet", "schema", reason, None)]
    (failure,) = read_manifest(str(out)).failed_inputs
    assert message in failure["error"]


def test_a_file_that_is_not_parquet_fails_it(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    pq.write_table(pa.table({"text": [VISIT] * 100}), src / "whole.parquet")
    data = (src / "whole.parquet").read_bytes()
    (src / "cut.parquet").write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    assert run(src / "*.parquet", out) == 1
    assert [r[:3] for r in rejects_of(out)] == [("cut.parquet", "footer", "corrupt_input")]
    assert read_manifest(str(out)).counts["documents"] == 100


def test_the_files_datasets_writes(tmp_path: Path) -> None:
    # tests/data/corpus/: written by Hugging Face datasets (to_parquet, then to_json).
    out = tmp_path / "out"
    flags = ("--title-field", "meta.title", "--source", "hf")
    assert run(FIXTURES / "hf_datasets.*", out, *flags) == 0
    docs = documents(out)
    assert {k: (v["title"], v["sentences"]) for k, v in docs.items()} == {
        "hf/hf-0": ("River", RIVER_SENTENCES),
        "hf/hf-1": ("Visit", VISIT_SENTENCES),
    }
    manifest = read_manifest(str(out))
    assert manifest.counts["documents"] == 4  # each record from both files (same ids)
    assert manifest.dropped == {"no_text": 2}  # the empty text, twice


# --- flags, manifest, determinism -------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--source", "web/en", "no '/'"),
        ("--license", "(MIT OR Apache-2.0) AND CC-BY-4.0", None),
        ("--license", "MIT OR", "SPDX"),
        ("--license", "not a license!", "SPDX"),
        ("--license", "Acme Research Terms", "LicenseRef-<name>"),
        ("--language", "English", "BCP-47"),
        ("--language", "en_US", "BCP-47"),
        ("--text-field", "meta..title", "nested"),
    ],
)
def test_bad_flags_stop_before_any_work(tmp_path, capsys, flag, value, message) -> None:
    src = inputs_dir(tmp_path)
    (src / "a.jsonl").write_bytes(jsonl(RECORDS))
    if message is None:  # accepted: an SPDX expression's syntax only is checked
        assert run(src / "a.jsonl", tmp_path / "out", flag, value) == 0
        return
    with pytest.raises(SystemExit) as stop:
        run(src / "a.jsonl", tmp_path / "out", flag, value)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_manifest_records_license_and_language(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    (src / "a.jsonl").write_bytes(jsonl(RECORDS))
    out = tmp_path / "out"
    flags = ("--license", "CC-BY-4.0", "--language", "en", "--source", "web")
    assert run(src / "a.jsonl", out, *flags) == 0
    config = read_manifest(str(out)).config
    assert (config["license"], config["language"], config["source"]) == ("CC-BY-4.0", "en", "web")
    assert read_manifest(str(out)).stage == "corpus"
    assert run(src / "a.jsonl", tmp_path / "plain") == 0
    config = read_manifest(str(tmp_path / "plain")).config
    assert (config["license"], config["language"], config["source"]) == (None, None, "corpus")


def test_same_bytes_whatever_the_runner(tmp_path: Path) -> None:
    src = inputs_dir(tmp_path)
    for n in range(4):
        records = [
            {"id": f"{n}-{i}", "text": f"File {n} record {i} says this."} for i in range(300)
        ]
        (src / f"part-{n}.jsonl.gz").write_bytes(gzip.compress(jsonl(records)))
    one, two = tmp_path / "one", tmp_path / "two"
    assert run(src / "*.gz", one, "--unit-mb", "0") == 0
    workers = ("--direct_num_workers", "2", "--direct_running_mode", "multi_threading")
    assert run(src / "*.gz", two, "--unit-mb", "0", *workers) == 0
    digests = [
        {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.glob("*")}
        for d in (one, two)
    ]
    assert digests[0] == digests[1] and len(digests[0]) == 5  # 4 units' files and the manifest


# --- the real sample, end to end ------------------------------------------------------------


def test_real_sample_end_to_end_feeds_vocab_and_examples(tmp_path: Path, books_dir: Path) -> None:
    src = inputs_dir(tmp_path)
    # Alice as a corpus: each chapter one JSON record (what a book dataset row holds).
    text = (books_dir / "alice29.txt").read_text()
    chapters = [c for c in text.split("CHAPTER ")[1:]]
    records = [{"id": f"alice-{n}", "text": c} for n, c in enumerate(chapters, start=1)]
    (src / "alice.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl(records)))
    out = tmp_path / "documents"
    assert run(src / "alice.jsonl.zst", out, "--source", "alice") == 0
    docs = documents(out)
    assert sorted(docs) == sorted(f"alice/alice-{n}" for n in range(1, 13))
    assert docs["alice/alice-1"]["sentences"][1].startswith(
        "Alice was beginning to get very tired of sitting by her sister on the bank"
    )
    vocab_dir, shards = tmp_path / "vocab", tmp_path / "shards"
    assert (
        vocab.run(["--documents", str(out), "--output", str(vocab_dir), "--vocab-size", "2000"])
        == 0
    )
    flags = ["--max-seq-length", "128", "--dupe-factor", "1", "--samples-per-shard", "500"]
    assert (
        examples.run(
            ["--documents", str(out), "--vocab", str(vocab_dir), "--output", str(shards), *flags]
        )
        == 0
    )
    manifest = json.loads((shards / "manifest.json").read_text())
    assert manifest["outputs"]["seq128"]["splits"]["train"]["shards"]


# --- object storage --------------------------------------------------------------------------


def test_corpus_on_s3_gives_the_same_bytes_as_local(s3_server, tmp_path: Path) -> None:
    endpoint, client = s3_server
    bucket = s3_server.bucket("corpus-stage")
    data = zstandard.ZstdCompressor().compress(jsonl(RECORDS))
    client.put_object(Bucket=bucket, Key="in/part-0.jsonl.zst", Body=data)
    pq.write_table(pa.table({"text": [VISIT]}), tmp_path / "part-1.parquet")
    client.upload_file(str(tmp_path / "part-1.parquet"), bucket, "in/part-1.parquet")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.jsonl.zst").write_bytes(data)
    (tmp_path / "part-1.parquet").rename(tmp_path / "in" / "part-1.parquet")
    assert run(tmp_path / "in" / "*", tmp_path / "local") == 0
    remote = f"s3://{bucket}/out"
    assert run(f"s3://{bucket}/in/*", remote, *s3_flags(endpoint)) == 0
    local_manifest, remote_manifest = read_manifest(str(tmp_path / "local")), read_manifest(remote)
    assert remote_manifest.counts == local_manifest.counts
    assert remote_manifest.counts["documents"] == 4
    assert [(f.name, f.sha256) for f in remote_manifest.files] == [
        (f.name, f.sha256) for f in local_manifest.files
    ]


def test_a_corpus_whose_every_record_is_rejected_streams_its_rejects(tmp_path: Path) -> None:
    """The usual mistake, a wrong --text-field: every record is a reject. They are written to
    the unit's rejects file as they come (at most HELD_REJECTS held), all of them, in order."""
    rows = 2 * HELD_REJECTS + 500
    path = tmp_path / "in" / "web.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"id": i, "content": "words"}) + "\n" for i in range(rows)))
    out = tmp_path / "out"
    assert run([path], out) == 1  # nothing kept, everything rejected (empty_outputs.py)
    manifest = read_manifest(str(out))
    assert manifest.rejected == {"text_missing": rows}
    assert manifest.files == []
    (rejects_file,) = manifest.rejects_files
    lines = (out / rejects_file).read_text().splitlines()
    assert len(lines) == rows
    assert [json.loads(lines[i])["position"] for i in (0, rows - 1)] == ["line 1", f"line {rows}"]


def test_a_unit_holds_at_most_held_rejects(tmp_path: Path) -> None:
    tally = UnitTally("00000", output_dir=str(tmp_path))
    held = []
    for i in range(HELD_REJECTS * 3 + 7):
        tally.reject(Reject(id=None, input="f", position=f"line {i + 1}", reason="r", error="e"))
        held.append(len(tally.rejects))
    assert max(held) == HELD_REJECTS - 1  # written when the HELD_REJECTS-th comes
    summary = finish_unit(str(tmp_path), tally, [])
    assert summary["rejected"] == {"r": HELD_REJECTS * 3 + 7}
    written = (tmp_path / summary["rejects_file"]).read_text().splitlines()
    assert len(written) == HELD_REJECTS * 3 + 7
    assert json.loads(written[-1])["position"] == f"line {HELD_REJECTS * 3 + 7}"
