"""`bertkit inspect SHARDS --parquet OUT`: the literal shards of tests/test_inspect.py (three
hand-made examples, written by the real writer) exported, read back with pyarrow and queried
with DuckDB; shards of full sentences without masks; refusals; one run on the real sample.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.beam.shards import write_shard
from pipelines.inspect import export
from schemas.examples import (
    PRETRAINING_EXAMPLE_SCHEMA,
    PRETRAINING_EXAMPLE_TOKENS_SCHEMA,
    SHARDS_MANIFEST_NAME,
    PretrainingExample,
    sample_key,
)
from schemas.shards import FULL_SENTENCES, NO_MASKS, SequenceOutput, ShardsManifest, SplitShards
from tests.support.s3server import client_environment
from tests.test_inspect import TRAIN_SHARD, VOCAB, inspect, write_shards, write_vocab

# The rows of the literal shards (tests/test_inspect.py), train then heldout.
ROWS = [
    {
        "key": "000000000000",
        "input_ids": [2, 5, 4, 7, 3, 8, 10, 9, 12, 3],
        "segment_ids": [0, 0, 0, 0, 0, 1, 1, 1, 1, 1],
        "masked_lm_positions": [2, 6, 7],
        "masked_lm_ids": [6, 5, 9],
        "next_sentence_label": 0,
        "doc_a": "books/a",
        "doc_b": "books/a",
        "dupe_pass": 0,
    },
    {
        "key": "000000000001",
        "input_ids": [2, 5, 10, 11, 3, 5, 4, 12, 3],
        "segment_ids": [0, 0, 0, 0, 0, 1, 1, 1, 1],
        "masked_lm_positions": [6],
        "masked_lm_ids": [6],
        "next_sentence_label": 1,
        "doc_a": "books/a",
        "doc_b": "books/b",
        "dupe_pass": 1,
    },
    {
        "key": "000000000000",
        "input_ids": [2, 5, 6, 3, 8, 5, 9, 3],
        "segment_ids": [0, 0, 0, 0, 1, 1, 1, 1],
        "masked_lm_positions": [5],
        "masked_lm_ids": [5],
        "next_sentence_label": 0,
        "doc_a": "books/c",
        "doc_b": "books/c",
        "dupe_pass": 0,
    },
]
TOKENS = [
    ["[CLS]", "the", "[MASK]", "sat", "[SEP]", "on", "dog", "mat", ".", "[SEP]"],
    ["[CLS]", "the", "dog", "ran", "[SEP]", "the", "[MASK]", ".", "[SEP]"],
    ["[CLS]", "the", "cat", "[SEP]", "on", "the", "mat", "[SEP]"],
]
MASKED_LM_TOKENS = [["cat", "the", "mat"], ["cat"], ["the"]]


def same_schema(written: pa.Schema, schema: pa.Schema) -> bool:
    """The schema, its docs and metadata; a list's element is named `element` in Parquet
    (the spec's name), `item` in Arrow."""
    return (
        [(f.name, str(f.type).replace("<element:", "<item:"), f.nullable, f.metadata)
         for f in written]
        == [(f.name, str(f.type), f.nullable, f.metadata) for f in schema]
        and written.metadata == schema.metadata
    )  # fmt: skip


@pytest.fixture
def shards_dir(tmp_path: Path) -> Path:
    vocab_dir = tmp_path / "vocab"
    return write_shards(tmp_path, str(vocab_dir), write_vocab(vocab_dir))


def test_every_example_with_its_tokens(shards_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "examples.parquet"
    code, lines, err = inspect(capsys, str(shards_dir), "--parquet", str(out))
    assert (code, err) == (0, "")
    assert lines == [
        f"vocabulary {tmp_path / 'vocab' / 'vocab.txt'} (13 tokens, sha256 matches the manifest)",
        f"wrote {out}: 3 examples (ids and tokens) in 1 row group, zstd",
    ]
    parquet = pq.ParquetFile(out)
    assert same_schema(parquet.schema_arrow, PRETRAINING_EXAMPLE_TOKENS_SCHEMA)
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    expected = [
        {**row, "tokens": tokens, "masked_lm_tokens": masked}
        for row, tokens, masked in zip(ROWS, TOKENS, MASKED_LM_TOKENS, strict=True)
    ]
    assert parquet.read().to_pylist() == expected
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def duck(query: str, *parameters: str) -> list[tuple]:
    """All rows of a query, on a connection of its own (the module's default connection is
    shared by every test in the process)."""
    with duckdb.connect() as connection:
        return connection.execute(query, list(parameters)).fetchall()


def test_duckdb_queries_the_export(shards_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "examples.parquet"
    assert inspect(capsys, str(shards_dir), "--parquet", str(out))[0] == 0
    query = (
        "SELECT key, len(input_ids), tokens[3], masked_lm_tokens FROM read_parquet(?) "
        "WHERE next_sentence_label = 1"
    )
    assert duck(query, str(out)) == [("000000000001", 9, "dog", ["cat"])]
    unnested = "SELECT t, count(*) FROM (SELECT unnest(tokens) AS t FROM read_parquet(?)) "
    counts = duck(unnested + "GROUP BY t ORDER BY 2 DESC, 1 LIMIT 2", str(out))
    assert counts == [("[SEP]", 6), ("the", 5)]


def test_limit_split_and_seq_choose_the_rows(shards_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.parquet"
    for flags, rows in [
        (["--limit", "1"], ROWS[:1]),
        (["--limit", "2", "--split", "heldout"], ROWS[2:]),
        (["--split", "train", "--seq", "128"], ROWS[:2]),
        (["--limit", "0"], []),
    ]:
        code, _, err = inspect(capsys, str(shards_dir), "--parquet", str(out), *flags)
        assert (code, err) == (0, ""), flags
        table = pq.read_table(out, columns=list(PRETRAINING_EXAMPLE_SCHEMA.names))
        assert table.to_pylist() == rows, flags
    code, _lines, err = inspect(capsys, str(shards_dir), "--parquet", str(out), "--seq", "512")
    assert code == 1 and "has no seq512 shards: --seq one of 128" in err


def test_without_a_vocabulary_the_ids_alone(tmp_path: Path, capsys) -> None:
    shards = write_shards(tmp_path, str(tmp_path / "nowhere"), hashlib.sha256(b"").hexdigest())
    out = tmp_path / "ids.parquet"
    code, lines, _ = inspect(capsys, str(shards), "--parquet", str(out))
    assert code == 0
    assert lines[0].startswith("no vocabulary: the manifest's ")
    assert lines[1] == f"wrote {out}: 3 examples (ids) in 1 row group, zstd"
    table = pq.read_table(out)
    assert same_schema(table.schema, PRETRAINING_EXAMPLE_SCHEMA)
    assert table.to_pylist() == ROWS
    vocab = tmp_path / "given"
    write_vocab(vocab, VOCAB[:8])  # ids 8 and up are past it (and no sha256 to check)
    loose = tmp_path / "loose" / "shard-000000.tar"  # no manifest above it: nothing checked
    loose.parent.mkdir()
    shutil.copy(shards / TRAIN_SHARD, loose)
    shard = str(loose)
    code, _, err = inspect(capsys, shard, "--parquet", str(out), "--vocab", str(vocab))
    assert code == 1
    assert err == (
        f"bertkit inspect: error: {shard}: sample 000000000000 has token id 12, and "
        f"{vocab / 'vocab.txt'} has 8 tokens: pass the --vocab the shards were made with\n"
    )
    assert pq.read_table(out).to_pylist() == ROWS  # the earlier export is left as it was


def test_full_sentences_without_masks_export(tmp_path: Path, capsys) -> None:
    """Shards of `--sequences full-sentences --masking none`: one segment, label 0, no
    predictions, doc_b stored empty (read as doc_a)."""
    vocab_dir = tmp_path / "vocab"
    sha256 = write_vocab(vocab_dir)
    shards = tmp_path / "shards"
    (shards / "seq128" / "train").mkdir(parents=True)
    samples = [
        PretrainingExample(np.array(ids, np.uint16), len(ids), np.zeros(0, np.uint16),
                           np.zeros(0, np.uint16), 0, doc_a, doc_b, 0)
        for ids, doc_a, doc_b in [([2, 5, 6, 7, 3, 10, 11, 3], "books/a", "books/b"),
                                  ([2, 8, 5, 9, 3], "books/b", "")]
    ]  # fmt: skip
    info = write_shard(
        str(shards), TRAIN_SHARD, [(sample_key(i), e.encode(2)) for i, e in enumerate(samples)]
    )
    manifest = ShardsManifest(
        vocab={"path": str(vocab_dir), "sha256": sha256, "size": len(VOCAB), "cased": False},
        inputs=[],
        config={},
        layout={"id_width": 2},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={"seq128": SequenceOutput(128, 0, {"train": SplitShards(2, 0, 13, 0, [info])})},
        sequences=FULL_SENTENCES,
        masking=NO_MASKS,
    )
    (shards / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    out = tmp_path / "full.parquet"
    assert inspect(capsys, str(shards), "--parquet", str(out))[0] == 0
    rows = pq.read_table(out, columns=["input_ids", "segment_ids", "masked_lm_positions",
                                       "next_sentence_label", "doc_a", "doc_b", "tokens",
                                       "masked_lm_tokens"]).to_pylist()  # fmt: skip
    assert rows == [
        {
            "input_ids": [2, 5, 6, 7, 3, 10, 11, 3],
            "segment_ids": [0] * 8,
            "masked_lm_positions": [],
            "next_sentence_label": 0,
            "doc_a": "books/a",
            "doc_b": "books/b",
            "tokens": ["[CLS]", "the", "cat", "sat", "[SEP]", "dog", "ran", "[SEP]"],
            "masked_lm_tokens": [],
        },
        {
            "input_ids": [2, 8, 5, 9, 3],
            "segment_ids": [0] * 5,
            "masked_lm_positions": [],
            "next_sentence_label": 0,
            "doc_a": "books/b",
            "doc_b": "books/b",
            "tokens": ["[CLS]", "on", "the", "mat", "[SEP]"],
            "masked_lm_tokens": [],
        },
    ]


def test_a_file_bertkit_did_not_write_is_refused_before_any_work(
    shards_dir: Path, tmp_path: Path, capsys
) -> None:
    foreign = tmp_path / "theirs.parquet"
    pq.write_table(pq.read_table(_export(shards_dir, tmp_path, capsys)).drop(["key"])
                   .replace_schema_metadata({}), foreign)  # fmt: skip
    text = tmp_path / "notes.txt"
    text.write_text("not parquet\n")
    documents = tmp_path / "documents.parquet"  # bertkit's, but another record
    pq.write_table(
        pq.read_table(foreign).replace_schema_metadata({"bertkit.record": "Document"}), documents
    )
    for path in (foreign, text, documents):
        before = path.read_bytes()
        (shards_dir / TRAIN_SHARD).rename(shards_dir / "moved")  # any read would fail
        code, lines, err = inspect(capsys, str(shards_dir), "--parquet", str(path))
        (shards_dir / "moved").rename(shards_dir / TRAIN_SHARD)
        assert (code, lines) == (1, [])
        assert err == (
            f"bertkit inspect: error: --parquet {path} exists and bertkit did not write it "
            "(its Parquet schema has no bertkit.record: PretrainingExample): nothing was "
            "written; choose another file or move it\n"
        )
        assert path.read_bytes() == before
    code, _, err = inspect(capsys, str(shards_dir), "--parquet", str(tmp_path))
    assert code == 1 and "is a directory: give a file name" in err


def _export(shards_dir: Path, tmp_path: Path, capsys) -> Path:
    out = tmp_path / "ours.parquet"
    assert inspect(capsys, str(shards_dir), "--parquet", str(out))[0] == 0
    return out


def test_an_earlier_export_is_replaced(shards_dir: Path, tmp_path: Path, capsys) -> None:
    out = _export(shards_dir, tmp_path, capsys)
    first = out.read_bytes()
    assert inspect(capsys, str(shards_dir), "--parquet", str(out), "--limit", "1")[0] == 0
    assert pq.read_table(out).num_rows == 1
    assert inspect(capsys, str(shards_dir), "--parquet", str(out))[0] == 0
    assert out.read_bytes() == first  # the same shards and flags give the same bytes


def test_a_damaged_shard_names_it_and_leaves_nothing(
    shards_dir: Path, tmp_path: Path, capsys
) -> None:
    shard = shards_dir / TRAIN_SHARD
    data = bytearray(shard.read_bytes())
    data[512 + 16 + 18] ^= 0x01  # the first token id of the first sample
    shard.write_bytes(bytes(data))
    out = tmp_path / "out" / "examples.parquet"
    code, _, err = inspect(capsys, str(shards_dir), "--parquet", str(out))
    assert code == 1
    assert err.startswith(
        f"bertkit inspect: error: {shard}: samples 0–1 (bytes 0–2,048) do not match the "
        "manifest's sha256"
    )
    assert os.listdir(out.parent) == []  # neither OUT nor a temporary file


def test_row_groups_bound_memory(shards_dir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(export, "ROW_GROUP_ROWS", 2)
    out = tmp_path / "groups.parquet"
    code, lines, _ = inspect(capsys, str(shards_dir), "--parquet", str(out))
    assert code == 0 and lines[-1].endswith("3 examples (ids and tokens) in 2 row groups, zstd")
    parquet = pq.ParquetFile(out)
    assert [parquet.metadata.row_group(i).num_rows for i in range(2)] == [2, 1]
    assert parquet.read().to_pylist()[2]["tokens"] == TOKENS[2]


def test_export_to_s3(s3_server, shards_dir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    endpoint, client = s3_server
    bucket = s3_server.bucket("exports")
    for name, value in {**client_environment(endpoint), "NO_PROXY": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(name, value)
    url = f"s3://{bucket}/parquet/examples.parquet"
    code, lines, _ = inspect(capsys, str(shards_dir), "--parquet", url, "--split", "train")
    assert (
        code == 0 and lines[-1] == f"wrote {url}: 2 examples (ids and tokens) in 1 row group, zstd"
    )
    local = tmp_path / "downloaded.parquet"
    client.download_file(bucket, "parquet/examples.parquet", str(local))
    assert pq.read_table(local).to_pylist()[1]["tokens"] == TOKENS[1]
    assert inspect(capsys, str(shards_dir), "--parquet", url)[0] == 0  # ours: replaced
    client.put_object(Bucket=bucket, Key="parquet/other.parquet", Body=b"PAR1 not ours")
    code, _, err = inspect(
        capsys, str(shards_dir), "--parquet", f"s3://{bucket}/parquet/other.parquet"
    )
    assert code == 1 and "exists and bertkit did not write it" in err


def test_the_real_sample(sample_shards: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sample.parquet"
    code, _lines, _ = inspect(
        capsys, str(sample_shards), "--parquet", str(out), "--split", "heldout"
    )
    assert code == 0
    manifest = json.loads((sample_shards / SHARDS_MANIFEST_NAME).read_text())
    heldout = manifest["outputs"]["seq128"]["splits"]["heldout"]
    (totals,) = duck(
        "SELECT count(*), sum(len(input_ids)), sum(next_sentence_label), "
        "sum(len(masked_lm_positions)), bool_and(len(tokens) = len(input_ids)) "
        "FROM read_parquet(?)",
        str(out),
    )
    expected = (heldout["samples"], heldout["tokens"], heldout["not_next"], heldout["predictions"])
    assert totals == (*expected, True)
