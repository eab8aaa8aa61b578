"""`bertkit inspect` on literal shards and a literal vocabulary, locally, over HTTP and S3.

The shards are written with the real writer (`pipelines.beam.shards.write_shard`) from three
hand-made examples, so every figure below is worked out by hand:

    train   #0 IsNext   [CLS] the [MASK]→cat sat [SEP] | on {dog→the} {mat} . [SEP]
            #1 NotNext  [CLS] the dog ran [SEP] | the [MASK]→cat . [SEP]
    heldout #0 IsNext   [CLS] the cat [SEP] | on {the} mat [SEP]

train: 2 examples, 19 tokens, NotNext 1 (0.5), 4 predictions ([MASK] 2, kept 1, random 1).
The documents test runs the books stage on the embedded real sample (4 books).
"""

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bertkit import cli
from pipelines.beam.shards import write_shard
from pipelines.inspect import example_stats, iter_examples, open_target, shard_refs
from pipelines.inspect.stats import (
    DocumentStats,
    ExampleStats,
    ShardsStats,
    SplitTally,
    document_mismatches,
    manifest_mismatches,
)
from pipelines.inspect.targets import Target
from pipelines.io import storage
from schemas.documents import DOCUMENT_SCHEMA, DocumentColumn
from schemas.examples import (
    PRETRAINING_EXAMPLE_SCHEMA,
    SHARDS_MANIFEST_NAME,
    PretrainingExample,
    sample_key,
)
from schemas.manifest import MANIFEST_NAME, DocumentsManifest, OutputFile
from schemas.shards import SequenceOutput, ShardInfo, ShardsManifest, SplitShards
from schemas.vocab import VOCAB_FILE

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "dog",
    "ran",
    ".",
]
MASK_ID = VOCAB.index("[MASK]")
TRAIN_SHARD = "seq128/train/shard-000000.tar"
HELDOUT_SHARD = "seq128/heldout/shard-000000.tar"


def example(ids, a_length, positions, originals, label, doc_a, doc_b, dupe_pass):
    return PretrainingExample(
        np.array(ids, dtype=np.uint16),
        a_length,
        np.array(positions, dtype=np.uint16),
        np.array(originals, dtype=np.uint16),
        label,
        doc_a,
        doc_b,
        dupe_pass,
    )


TRAIN = [
    example([2, 5, 4, 7, 3, 8, 10, 9, 12, 3], 5, [2, 6, 7], [6, 5, 9], 0, "books/a", "books/a", 0),
    example([2, 5, 10, 11, 3, 5, 4, 12, 3], 5, [6], [6], 1, "books/a", "books/b", 1),
]
HELDOUT = [example([2, 5, 6, 3, 8, 5, 9, 3], 4, [5], [5], 0, "books/c", "books/c", 0)]

JSON_LINES = [
    '{"input_ids":[2,5,4,7,3,8,10,9,12,3],"segment_ids":[0,0,0,0,0,1,1,1,1,1],'
    '"masked_lm_positions":[2,6,7],"masked_lm_ids":[6,5,9],"next_sentence_label":0}',
    '{"input_ids":[2,5,10,11,3,5,4,12,3],"segment_ids":[0,0,0,0,0,1,1,1,1],'
    '"masked_lm_positions":[6],"masked_lm_ids":[6],"next_sentence_label":1}',
    '{"input_ids":[2,5,6,3,8,5,9,3],"segment_ids":[0,0,0,0,1,1,1,1],'
    '"masked_lm_positions":[5],"masked_lm_ids":[5],"next_sentence_label":0}',
]

TRAIN_STATS = [
    "examples 2 in 1 shard",
    "  seq128/train     2 examples in 1 shard, NotNext 1, 19 tokens, 4 predictions",
    "length (tokens per example): min 9, max 10, mean 9.5",
    "         1–16         2  ██████████████████████████████",
    "        17–32         0",
    "        33–48         0",
    "        49–64         0",
    "        65–80         0",
    "        81–96         0",
    "       97–112         0",
    "      113–128         0",
    "next sentence: NotNext 1 of 2 (0.500), IsNext 1",
    "predictions per example: mean 2.00, min 1, max 3; 0.211 of tokens (4 of 19)",
    "masked positions 4: [MASK] 2 (0.500), kept 1 (0.250), random 1 (0.250)",
    "checked against the manifest: every shard's sha256 and every split's counts",
]


def write_vocab(directory: Path, tokens: list[str] = VOCAB) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    data = "".join(f"{token}\n" for token in tokens).encode()
    (directory / VOCAB_FILE).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def write_shards(root: Path, vocab_path: str, vocab_sha256: str) -> Path:
    """root/shards: two shards and their manifest, the layout `bertkit examples` writes."""
    shards = root / "shards"
    for split in ("train", "heldout"):
        (shards / "seq128" / split).mkdir(parents=True)
    train = write_shard(
        str(shards), TRAIN_SHARD, [(sample_key(i), e.encode(2)) for i, e in enumerate(TRAIN)]
    )
    heldout = write_shard(
        str(shards), HELDOUT_SHARD, [(sample_key(i), e.encode(2)) for i, e in enumerate(HELDOUT)]
    )
    manifest = ShardsManifest(
        vocab={"path": vocab_path, "sha256": vocab_sha256, "size": len(VOCAB), "cased": False},
        inputs=[],
        config={"max_seq_length": [128]},
        layout={"id_width": 2},
        deviations=[],
        counts={"examples": 3},
        dropped={},
        rejected={},
        outputs={
            "seq128": SequenceOutput(
                128,
                20,
                {
                    "train": SplitShards(
                        samples=2, not_next=1, tokens=19, predictions=4, shards=[train]
                    ),
                    "heldout": SplitShards(
                        samples=1, not_next=0, tokens=8, predictions=1, shards=[heldout]
                    ),
                },
            )
        },
    )
    (shards / SHARDS_MANIFEST_NAME).write_text(manifest.to_json())
    return shards


@pytest.fixture
def shards_dir(tmp_path: Path) -> Path:
    vocab_dir = tmp_path / "vocab"
    return write_shards(tmp_path, str(vocab_dir), write_vocab(vocab_dir))


def inspect(capsys, *args: str) -> tuple[int, list[str], str]:
    """Run `bertkit inspect ARGS`: exit code, stdout lines, stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        cli.main(["inspect", *args])
    captured = capsys.readouterr()
    return exited.value.code, captured.out.splitlines(), captured.err


# --------------------------------------------------------------------------- local shards


def test_json_lines_are_the_five_training_fields(shards_dir: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(shards_dir), "--json", "10")
    assert code == 0
    assert lines == JSON_LINES  # train before heldout, unpadded, Google's feature names
    assert (
        inspect(capsys, str(shards_dir / SHARDS_MANIFEST_NAME), "--json", "1")[1] == JSON_LINES[:1]
    )
    assert (
        inspect(capsys, str(shards_dir), "--json", "5", "--split", "heldout")[1] == JSON_LINES[2:]
    )


def test_stats_of_a_split_are_exact(shards_dir: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(shards_dir), "--stats", "--seq", "128", "--split", "train")
    assert code == 0
    assert lines[lines.index("examples 2 in 1 shard") :] == TRAIN_STATS
    assert (
        "  train    2 examples in 1 shard (2,048 bytes), NotNext 1, 19 tokens, 4 predictions"
        in lines
    )


def test_stats_of_the_whole_directory(shards_dir: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(shards_dir), "--stats")
    assert code == 0
    assert "examples 3 in 2 shards" in lines
    assert "  seq128/heldout   1 example in 1 shard, NotNext 0, 8 tokens, 1 prediction" in lines
    assert "next sentence: NotNext 1 of 3 (0.333), IsNext 2" in lines
    assert "masked positions 5: [MASK] 2 (0.400), kept 2 (0.400), random 1 (0.200)" in lines


def test_show_marks_masked_tokens_and_segments(shards_dir: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(shards_dir), "--show", "2")
    assert code == 0
    assert lines[0].startswith("vocabulary ") and lines[0].endswith(
        "(13 tokens, sha256 matches the manifest)"
    )
    assert lines[1:] == [
        "seq128/train #000000000000  IsNext  doc_a books/a  doc_b books/a  dupe_pass 0  "
        "(10 tokens: A 5, B 5; 3 predicted)",
        "  A  [CLS] the [MASK]→cat sat [SEP]",
        "  B  on {dog→the} {mat} . [SEP]",
        "seq128/train #000000000001  NotNext  doc_a books/a  doc_b books/b  dupe_pass 1  "
        "(9 tokens: A 5, B 4; 1 predicted)",
        "  A  [CLS] the dog ran [SEP]",
        "  B  the [MASK]→cat . [SEP]",
    ]


@pytest.mark.parametrize("vocab_path", ["http://203.0.113.7/vocab", "s3://their-bucket/vocab"])
def test_a_manifest_cannot_choose_a_url_to_fetch(tmp_path: Path, capsys, vocab_path) -> None:
    shards = write_shards(tmp_path, vocab_path, "0" * 64)  # a local manifest naming a URL
    code, lines, _ = inspect(capsys, str(shards), "--show", "1")
    assert code == 0  # nothing was fetched (203.0.113.7 is a documentation address)
    assert lines[0] == (
        f"no vocabulary: the manifest's vocab path {vocab_path} is a URL elsewhere than the "
        "manifest (another scheme, host or bucket), and a manifest does not choose what "
        "bertkit fetches: pass --vocab DIR for tokens"
    )
    assert "  A  2 5 {4→6} 7 3" in lines  # token ids instead


def test_show_without_a_vocabulary_prints_ids(tmp_path: Path, capsys) -> None:
    shards = write_shards(tmp_path, str(tmp_path / "gone"), "0" * 64)
    code, lines, _ = inspect(capsys, str(shards), "--show", "1", "--stats")
    assert code == 0
    assert lines[0].startswith("no vocabulary: the manifest's")
    assert "  A  2 5 {4→6} 7 3" in lines and "  B  8 {10→5} {9} 12 3" in lines
    assert any(line.startswith("masked positions 5: kept 2 (0.400), replaced 3") for line in lines)


def test_schema_prints_fields_docs_and_versions(shards_dir: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(shards_dir), "--schema")
    assert code == 0
    assert lines[:2] == [
        "record PretrainingExample, schema version 2.1 (this bertkit)",
        "manifest: record PretrainingExample, schema version 2.1, written by bertkit 0.1.0",
    ]
    assert [line.split()[0] for line in lines[2:]] == PRETRAINING_EXAMPLE_SCHEMA.names
    assert any("0 = IsNext (B follows A), 1 = NotNext" in line for line in lines)


def test_summary_of_a_shards_directory(shards_dir: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(shards_dir))
    sha = hashlib.sha256((shards_dir.parent / "vocab" / VOCAB_FILE).read_bytes()).hexdigest()
    assert code == 0
    assert lines == [
        f"shards directory {shards_dir} (manifest.json)",
        "record PretrainingExample, schema version 2.1, written by bertkit 0.1.0",
        f"vocab: sha256 {sha}, path {shards_dir.parent / 'vocab'}, size 13, cased False",
        "sequences pairs (sentence pairs with a next-sentence label), masking static (masks "
        "stored)",
        "seq128: max 20 predictions per sequence",
        "  train    2 examples in 1 shard (2,048 bytes), NotNext 1, 19 tokens, 4 predictions",
        "  heldout  1 example in 1 shard (2,048 bytes), NotNext 0, 8 tokens, 1 prediction",
        "total: 3 examples in 2 shards, 4,096 bytes",
        "rejected: none; dropped: none",
    ]


def test_a_single_shard_is_checked_against_the_manifest_above_it(
    shards_dir: Path, tmp_path: Path, capsys
) -> None:
    shard = shards_dir / TRAIN_SHARD
    code, lines, _ = inspect(capsys, str(shard))
    assert code == 0
    assert lines[1].startswith(f"listed in {shards_dir / SHARDS_MANIFEST_NAME} as {TRAIN_SHARD}")
    assert lines[-1] == "read: 2 samples, the tar is complete; matches the manifest"
    assert inspect(capsys, str(shard), "--json", "9")[1] == JSON_LINES[:2]
    alone = tmp_path / "alone" / "shard-000007.tar"  # no manifest anywhere above it
    alone.parent.mkdir()
    shutil.copy(shard, alone)
    code, lines, _ = inspect(capsys, str(alone), "--show", "1", "--vocab", str(tmp_path / "vocab"))
    assert code == 0
    assert lines[0].endswith("(13 tokens, not checked: no manifest)")
    assert lines[1].startswith("shard #000000000000  IsNext")
    code, _, err = inspect(capsys, str(alone), "--split", "train")
    assert code == 1 and "--seq and --split choose shards of a manifest" in err


def test_library_api(shards_dir: Path) -> None:
    target = open_target(str(shards_dir))
    assert [s.label for s in shard_refs(target)] == ["seq128/train", "seq128/heldout"]
    stats = example_stats(iter_examples(str(shards_dir), seq=128, split="train"), MASK_ID, 32)
    assert stats["examples"] == 2 and stats["not_next_ratio"] == 0.5
    assert stats["length_histogram"] == [(1, 16, 2), (17, 32, 0)]
    assert stats["predictions"] == {
        "total": 4,
        "mean": 2.0,
        "min": 1,
        "max": 3,
        "per_token": 4 / 19,
    }
    assert stats["masked"] == {
        "mask": 2,
        "keep": 1,
        "random": 1,
        "replaced": None,
        "mask_ratio": 0.5,
        "keep_ratio": 0.25,
        "random_ratio": 0.25,
    }
    assert [e.key for e in iter_examples(target, limit=2)] == [sample_key(0), sample_key(1)]


# --------------------------------------------------------------------------- statistics
# The statistics functions on the literal examples above, with no files and no CLI.

SPLIT_COUNTS = {
    "seq128/train": {"shards": 1, "examples": 2, "not_next": 1, "tokens": 19, "predictions": 4},
    "seq128/heldout": {"shards": 1, "examples": 1, "not_next": 0, "tokens": 8, "predictions": 1},
}


def literal_shards_target(heldout: SplitShards) -> Target:
    """A shards target whose manifest lists TRAIN as seq128/train and `heldout` beside it."""
    train = SplitShards(
        samples=2,
        not_next=1,
        tokens=19,
        predictions=4,
        shards=[ShardInfo(TRAIN_SHARD, 2, 3072, "0" * 64, sample_key(0))],
    )
    manifest = ShardsManifest(
        vocab={},
        inputs=[],
        config={},
        layout={},
        deviations=[],
        counts={},
        dropped={},
        rejected={},
        outputs={"seq128": SequenceOutput(128, 20, {"train": train, "heldout": heldout})},
    )
    location = storage.Location("shards", "/literal/shards", "/literal/shards/manifest.json")
    return Target(location, manifest)


def test_shards_statistics_per_split_and_overall_without_files() -> None:
    stats = ShardsStats(ExampleStats(MASK_ID, 128))
    for label, examples in (("seq128/train", TRAIN), ("seq128/heldout", HELDOUT)):
        tally = stats.splits.setdefault(label, SplitTally())
        tally.shards += 1
        for one in examples:
            tally.add(one)
            stats.examples.add(one)
    result = stats.result()
    assert result["complete"] is False  # only collect_shards_stats marks a full read
    assert (result["shards"], result["splits"]) == (2, SPLIT_COUNTS)
    assert (result["examples"], result["tokens"], result["not_next"]) == (3, 27, 1)
    assert result["not_next_ratio"] == pytest.approx(1 / 3)
    assert (result["length_min"], result["length_max"]) == (8, 10)
    assert result["length_histogram"] == [(1, 16, 3)] + [
        (i * 16 + 1, i * 16 + 16, 0) for i in range(1, 8)
    ]
    assert result["predictions"] == {
        "total": 5,
        "mean": pytest.approx(5 / 3),
        "min": 1,
        "max": 3,
        "per_token": pytest.approx(5 / 27),
    }
    assert result["masked"] == {
        "mask": 2,
        "keep": 2,
        "random": 1,
        "replaced": None,
        "mask_ratio": 0.4,
        "keep_ratio": 0.4,
        "random_ratio": 0.2,
    }

    heldout_info = ShardInfo(HELDOUT_SHARD, 1, 2048, "0" * 64, sample_key(0))
    matching = SplitShards(samples=1, not_next=0, tokens=8, predictions=1, shards=[heldout_info])
    assert manifest_mismatches(literal_shards_target(matching), result) == []
    differing = SplitShards(samples=1, not_next=1, tokens=9, predictions=1, shards=[heldout_info])
    assert manifest_mismatches(literal_shards_target(differing), result) == [
        "seq128/heldout: not_next 0 (manifest 1), tokens 8 (manifest 9)"
    ]


def test_length_histogram_grows_past_the_sequence_length() -> None:
    long = example([2, *[5] * 38, 3], 20, [1], [6], 0, "books/a", "books/a", 0)  # 40 tokens
    stats = example_stats([long, HELDOUT[0]], MASK_ID, max_length=32)
    assert stats["length_histogram"] == [(1, 16, 1), (17, 32, 0), (33, 48, 1)]
    assert stats["masked"] == {
        "mask": 0,
        "keep": 1,
        "random": 1,
        "replaced": None,
        "mask_ratio": 0.0,
        "keep_ratio": 0.5,
        "random_ratio": 0.5,
    }


def test_sentences_per_document_in_powers_of_two_with_empty_buckets() -> None:
    stats = DocumentStats()
    sentences = [[], ["Ab."], [f"S{i}." for i in range(9)]]  # 0, 1 and 9 sentences
    output = OutputFile("part-0.parquet", 3, 10, 30, 500, "0" * 64)
    stats.add(output, pa.table({DocumentColumn.SENTENCES: sentences}))
    result = stats.result()
    assert (result["documents"], result["sentences"], result["text_bytes"]) == (3, 10, 30)
    assert result["sentences_per_document"] == {
        "mean": pytest.approx(10 / 3),
        "min": 0,
        "max": 9,
        "histogram": [(1, 1, 2), (2, 3, 0), (4, 7, 0), (8, 15, 1)],
    }
    assert document_mismatches(literal_documents([output]), result) == []


def test_document_mismatches_name_each_differing_file() -> None:
    read = {"per_file": {"a.parquet": {"documents": 2, "sentences": 5, "text_bytes": 40}}}
    manifest = literal_documents(
        [
            OutputFile("a.parquet", 2, 6, 40, 100, "0" * 64),
            OutputFile("b.parquet", 1, 1, 3, 100, "0" * 64),
        ]
    )
    assert document_mismatches(manifest, read) == [
        "a.parquet: sentences 5 (manifest 6)",
        "b.parquet: documents 0 (manifest 1), sentences 0 (manifest 1), text_bytes 0 (manifest 3)",
    ]


def literal_documents(files: list[OutputFile]) -> DocumentsManifest:
    return DocumentsManifest(
        stage="books",
        inputs=[],
        config={},
        counts={},
        dropped={},
        rejected={},
        failed_inputs=[],
        files=files,
    )


# --------------------------------------------------------------------------- damage


def test_a_tampered_shard_is_refused_before_any_of_its_examples_is_shown(
    shards_dir: Path, capsys
) -> None:
    shard = shards_dir / TRAIN_SHARD
    data = bytearray(shard.read_bytes())
    data[512 + 16 + 18] ^= 0x01  # block header, lengths, sample header: the first token id
    shard.write_bytes(bytes(data))
    code, lines, err = inspect(capsys, str(shards_dir), "--json", "5")
    assert code == 1
    assert lines[1:] == []  # the block's sha256 is checked before any example is printed
    assert err.startswith(
        f"bertkit inspect: error: {shard}: samples 0–1 (bytes 0–2,048) do not match the "
        "manifest's sha256"
    )
    assert "none of them was used" in err and "Traceback" not in err
    code, lines, err = inspect(capsys, str(shards_dir), "--stats", "--split", "train")
    assert code == 1 and f"{shard}: samples 0–1 (bytes 0–2,048) do not match" in err
    assert "statistics of what was read before the error:" in lines
    code, lines, _ = inspect(capsys, str(shards_dir), "--json", "5", "--no-verify")
    assert code == 0 and len(lines) == 3


def test_a_truncated_shard_names_the_shard(shards_dir: Path, capsys) -> None:
    shard = shards_dir / TRAIN_SHARD
    full = shard.read_bytes()
    shard.write_bytes(full[:600])  # inside the block of both samples: neither is read
    code, lines, err = inspect(capsys, str(shard), "--json", "5", "--no-verify")
    assert code == 1 and lines == []
    assert f"{shard}: " in err and "truncated" in err
    shard.write_bytes(full[:1024])  # cut exactly after the block (tarfile sees no fault)
    code, lines, err = inspect(capsys, str(shard), "--json", "5", "--no-verify")
    assert code == 1 and lines == JSON_LINES[:2]
    assert err == (
        f"bertkit inspect: error: {shard}: ends after 1,024 bytes without the tar end-of-archive "
        "blocks, after sample 000000000001; the shard is truncated: rebuild it or restore it "
        "from the source\n"
    )
    code, _, err = inspect(capsys, str(shard))  # through the manifest: its size is known
    assert code == 1
    assert err == (
        f"bertkit inspect: error: {shard}: ends after 1,024 bytes, the manifest records at "
        "least 2,048; the file is truncated: rebuild it or restore it from the source\n"
    )


def test_a_different_vocabulary_is_refused(shards_dir: Path, tmp_path: Path, capsys) -> None:
    other = tmp_path / "other-vocab"
    write_vocab(other, [*VOCAB[:5], "a", "kitten", *VOCAB[7:]])
    code, lines, err = inspect(capsys, str(shards_dir), "--show", "1", "--vocab", str(other))
    assert code == 1 and lines == []
    assert f"{other / VOCAB_FILE}: sha256" in err and "was made with vocab sha256" in err
    (tmp_path / "vocab" / VOCAB_FILE).write_text("[PAD]\n")  # the manifest's own, changed
    assert inspect(capsys, str(shards_dir), "--stats")[0] == 1


def test_a_missing_target_is_one_clear_line(tmp_path: Path, capsys) -> None:
    code, lines, err = inspect(capsys, str(tmp_path / "nowhere"))
    assert code == 1 and lines == []
    assert (
        err == f"bertkit inspect: error: {tmp_path / 'nowhere'}: no such file or directory; "
        "give a shards or documents directory, its manifest.json / _manifest.json, or a shard-*.tar\n"
    )
    code, _, err = inspect(capsys, str(tmp_path))  # a directory without a manifest
    assert code == 1 and "neither manifest.json (a shards directory) nor _manifest.json" in err
    (tmp_path / "notes.txt").write_text("a user's notes")
    code, _, err = inspect(capsys, str(tmp_path / "notes.txt"))
    assert code == 1 and err == (
        f"bertkit inspect: error: {tmp_path / 'notes.txt'} is a file but neither a shard "
        "(shard-*.tar) nor a manifest (manifest.json, _manifest.json); give a shards or "
        "documents directory, its manifest, or a shard\n"
    )


def test_gs_without_the_gcp_extra_says_what_to_install(capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "google.cloud.storage", None)  # as if not installed
    code, _, err = inspect(capsys, "gs://bucket/shards")
    assert code == 2  # before any work, as a bad flag is
    assert err == (
        "bertkit inspect: error: gs://bucket/shards needs the gcp extra (google-cloud-storage "
        "is not installed): pip install -c constraints.txt -e '.[gcp]' in the bertkit checkout\n"
    )


def test_storage_paths() -> None:
    assert storage.join("s3://b/shards/", "seq128/x.tar") == "s3://b/shards/seq128/x.tar"
    assert storage.parent("https://h/a/b/manifest.json") == "https://h/a/b"
    assert storage.basename("gs://b/a/shard-000001.tar") == "shard-000001.tar"
    assert storage.scheme("HTTP://h/x") == "http" and storage.scheme("/data/x") == ""


# --------------------------------------------------------------------------- documents


@pytest.fixture(scope="module")
def books_documents(sample_documents) -> Path:
    """The books stage's output on the embedded sample (extracted once, in conftest)."""
    return sample_documents[1]


def test_documents_stats_match_their_manifest(books_documents: Path, capsys) -> None:
    manifest = DocumentsManifest.from_json((books_documents / MANIFEST_NAME).read_text())
    counts = manifest.counts
    code, lines, _ = inspect(capsys, str(books_documents), "--stats")
    assert code == 0
    read = (
        f"read:     {counts['documents']} documents, {counts['sentences']:,} sentences, "
        f"{counts['text_bytes']:,} text bytes in 1 file"
    )
    assert (
        read in lines
        and read == "read:     4 documents, 6,340 sentences, 1,064,514 text bytes in 1 file"
    )
    assert lines[-1] == "checked against the manifest: every file's size and counts"
    assert "sentences per document: mean 1585.0, min 1,225, max 2,217" in lines


def test_documents_show_json_and_schema(books_documents: Path, capsys) -> None:
    code, lines, _ = inspect(capsys, str(books_documents), "--json", "2")
    assert code == 0
    rows = [json.loads(line) for line in lines]
    assert [list(r) for r in rows] == [DOCUMENT_SCHEMA.names] * 2
    assert [r["id"] for r in rows] == ["books/alice29", "books/asyoulik"]
    assert rows[0]["sentences"][0].startswith("Alice was beginning to get very tired")
    code, lines, _ = inspect(capsys, str(books_documents), "--show", "1", "--schema")
    assert code == 0
    assert [line.split()[0] for line in lines[2:8]] == DOCUMENT_SCHEMA.names
    assert "documents-00000-0000.parquet: same schema" in lines
    assert "books/alice29  'alice29'  (books, 1,225 sentences, 139,955 bytes)" in lines
    assert lines[-1] == "       … 1,222 more"


def test_a_manifest_pointing_outside_its_directory_is_refused(shards_dir: Path, capsys) -> None:
    manifest = shards_dir / "manifest.json"
    raw = json.loads(manifest.read_text())
    raw["outputs"]["seq128"]["splits"]["train"]["shards"][0]["path"] = "/dev/zero"
    manifest.write_text(json.dumps(raw))
    code, lines, err = inspect(capsys, str(shards_dir), "--stats")
    assert code == 1 and lines == []
    assert f"{manifest}: not a ShardsManifest (RecordError: " in err
    assert "shards[0].path is '/dev/zero'" in err
