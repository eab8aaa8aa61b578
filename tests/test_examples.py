"""`bertkit examples`: documents → shards, on the real sample and on literal documents.

What a correct run on the sample looks like (8,000-token vocab, --dupe-factor 3 at 128):
about 25,000 training examples, NotNext ≈ 0.53 (Google's rate: a one-sentence chunk is
always a random next), 15 % of tokens predicted, 80/10/10 mask/keep/random.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
import webdataset as wds
from apache_beam.testing.util import assert_that, equal_to

from pipelines import examples
from pipelines.beam.files import write_file
from pipelines.beam.planned import Planned
from pipelines.beam.spill import pack_example
from pipelines.examples.keys import KeyedSpillWriter
from pipelines.examples.plan import Routes
from pipelines.examples.shuffle import Routing
from pipelines.examples.stage_plan import ExamplesPlan
from pipelines.io.retry import RetryPolicy, range_opener
from pipelines.io.shards import iter_tar_samples, read_verified_samples
from pipelines.io.vocabulary import load_vocab
from schemas import (
    EXAMPLES_SCHEMA_VERSION,
    MANIFEST_NAME,
    SAMPLES_MEMBER,
    Document,
    DocumentColumn,
    DocumentsManifest,
    OutputFile,
    PretrainingExample,
    ShardsManifest,
    documents_table,
)
from schemas.examples import NOT_NEXT, SPLITS, sample_key, unpack_samples
from schemas.shards import BlockTableFile, block_table_path, split_dir

ONE_LEVEL = Routes(partitions=Routing(()), buckets=Routing(()))  # GroupByKeys alone


def run_examples(documents, vocab, output, *flags: str) -> int:
    return examples.run(
        [
            "--documents",
            *map(str, documents),
            "--vocab",
            str(vocab),
            "--output",
            str(output),
            *flags,
        ]
    )


def load_manifest(output: Path) -> ShardsManifest:
    return ShardsManifest.from_json((output / "manifest.json").read_text())


def read_examples(output: Path, seq: str, split: str) -> list[PretrainingExample]:
    manifest = load_manifest(output)
    found = []
    for shard in manifest.outputs[seq].splits[split].shards:
        opener = range_opener(str(output / shard.path), RetryPolicy())
        table = range_opener(str(output / block_table_path(shard.path)), RetryPolicy())
        for key, data in read_verified_samples(opener, shard.path, shard, open_table=table):
            found.append(PretrainingExample.decode(data, key))
    return found


SAMPLE_FLAGS = (
    "--max-seq-length",
    "128,512",
    "--dupe-factor",
    "3",
    "--samples-per-shard",
    "1500",
    "--heldout-fraction",
    "0.05",
)


@pytest.fixture(scope="module")
def sample_shards(tmp_path_factory, sample_documents, sample_vocab) -> Path:
    output = tmp_path_factory.mktemp("shards") / "shards"
    assert run_examples(sample_documents, sample_vocab, output, *SAMPLE_FLAGS) == 0
    return output


# --- the real sample ----------------------------------------------------------------------


def test_manifest_describes_every_shard_and_splits_are_balanced(sample_shards, sample_vocab):
    manifest = load_manifest(sample_shards)
    assert manifest.schema_version == EXAMPLES_SCHEMA_VERSION
    assert manifest.vocab["sha256"] == load_vocab(str(sample_vocab)).sha256
    assert manifest.config["max_seq_lengths"] == [128, 512]
    assert manifest.config["max_predictions_per_seq"] == [19, 77]  # round(length × 0.15)
    assert len(manifest.deviations) >= 5
    assert manifest.counts["documents"] == 101  # 97 articles + 4 books
    assert manifest.counts["documents_train"] + manifest.counts["documents_heldout"] == 101
    top = ["README.md", "manifest.json", "seq128", "seq512"]  # README.md: the dataset card
    assert sorted(p.name for p in sample_shards.iterdir()) == top
    for name, output in manifest.outputs.items():
        for split, shards in output.splits.items():
            sizes = [s.samples for s in shards.shards]
            assert sum(sizes) == shards.samples > 0, (name, split)
            assert max(sizes) - min(sizes) <= 1 and max(sizes) <= 1500
            assert [s.path for s in shards.shards] == [
                f"{name}/{split}/shard-{i:06d}.tar" for i in range(len(sizes))
            ]
            # Each shard, and beside it its block table, which the manifest records.
            assert sorted(p.name for p in (sample_shards / name / split).iterdir()) == [
                file
                for i in range(len(sizes))
                for file in (f"shard-{i:06d}.tar", f"shard-{i:06d}.tar.blocks.json")
            ]
            position = 0
            for shard in shards.shards:
                data = (sample_shards / shard.path).read_bytes()
                assert (len(data), hashlib.sha256(data).hexdigest()) == (shard.bytes, shard.sha256)
                assert shard.first_key == sample_key(position)
                position += shard.samples
                table = (sample_shards / block_table_path(shard.path)).read_bytes()
                digest = hashlib.sha256(table).hexdigest()
                assert shard.block_table == BlockTableFile(len(table), digest)
                assert shard.blocks == () and shard.block_samples == 512
    # Nothing is left behind but the shards, their block tables, the card and the manifest.
    assert not (sample_shards / "_work").exists()
    assert not list(sample_shards.rglob("*.tmp-*"))


def test_plain_webdataset_iterates_every_sample(sample_shards):
    """webdataset yields one record per block; unpack_samples gives the block's samples."""
    manifest = load_manifest(sample_shards)
    train = manifest.outputs["seq128"].splits["train"]
    last = len(train.shards) - 1
    url = str(sample_shards / f"seq128/train/shard-{{000000..{last:06d}}}.tar")
    blocks = list(wds.WebDataset(url, shardshuffle=False))
    tables = [(sample_shards / block_table_path(shard.path)).read_bytes() for shard in train.shards]
    assert len(blocks) == sum(
        len(shard.with_blocks(table, shard.path).blocks)
        for shard, table in zip(train.shards, tables, strict=True)
    )
    assert set(blocks[0]) >= {"__key__", SAMPLES_MEMBER}
    keys, samples = [], []
    for block in blocks:
        unpacked = unpack_samples(block[SAMPLES_MEMBER])
        keys += [sample_key(int(block["__key__"]) + i) for i in range(len(unpacked))]
        samples += unpacked
    assert keys == [sample_key(i) for i in range(train.samples)]
    PretrainingExample.decode(samples[0])  # a packed example, no pickle


def test_every_example_follows_the_algorithm(sample_shards, sample_vocab):
    vocab = load_vocab(str(sample_vocab))
    special = np.array(sorted(vocab.special_ids))
    documents_by_split = {}
    for seq, length, max_predictions in (("seq128", 128, 19), ("seq512", 512, 77)):
        for split in ("train", "heldout"):
            found = read_examples(sample_shards, seq, split)
            documents_by_split.setdefault(split, set()).update(e.doc_a for e in found)
            for e in found:
                ids = e.input_ids.astype(np.int64)
                n = len(ids)
                assert n <= length
                a = e.segment_a_length
                assert ids[0] == vocab.cls_id and ids[a - 1] == vocab.sep_id == ids[-1]
                assert a >= 3 and n - a >= 2  # A and B each hold at least one token
                positions = e.masked_lm_positions.astype(np.int64)
                assert len(positions) == min(max_predictions, max(1, round(n * 0.15)))
                assert np.all(np.diff(positions) > 0)
                assert not set(positions.tolist()) & {0, a - 1, n - 1}
                labels = e.masked_lm_ids.astype(np.int64)
                assert not np.isin(labels, special).any()
                # Outside the predictions no special token appears but [CLS] and two [SEP].
                restored = ids.copy()
                restored[positions] = labels
                assert np.isin(restored, special).sum() == 3
                replaced = ids[positions]
                assert np.all(
                    (replaced == vocab.mask_id) | (replaced == labels) | ~np.isin(replaced, special)
                )
                if e.next_sentence_label == NOT_NEXT:
                    assert e.doc_b != e.doc_a  # never the same document
                else:
                    assert e.doc_b == e.doc_a
                assert 0 <= e.dupe_pass < 3
    assert documents_by_split["heldout"] and not (
        documents_by_split["heldout"] & documents_by_split["train"]
    )


def test_statistics_match_google_s_distributions(sample_shards, sample_vocab):
    vocab = load_vocab(str(sample_vocab))
    found = read_examples(sample_shards, "seq128", "train")
    assert 20_000 < len(found) < 30_000
    not_next = sum(e.next_sentence_label for e in found) / len(found)
    assert 0.48 < not_next < 0.58  # 0.5, plus the forced random next of one-sentence chunks
    tokens = sum(len(e.input_ids) for e in found)
    predictions = sum(len(e.masked_lm_positions) for e in found)
    assert predictions / tokens == pytest.approx(0.15, abs=0.005)
    kinds = Counter()
    for e in found:
        replaced = e.input_ids[e.masked_lm_positions]
        kinds["mask"] += int((replaced == vocab.mask_id).sum())
        kinds["keep"] += int((replaced == e.masked_lm_ids).sum())
    kinds["random"] = predictions - kinds["mask"] - kinds["keep"]
    assert kinds["mask"] / predictions == pytest.approx(0.8, abs=0.01)
    assert kinds["keep"] / predictions == pytest.approx(0.1, abs=0.01)
    assert kinds["random"] / predictions == pytest.approx(0.1, abs=0.01)
    lengths = np.array([len(e.input_ids) for e in found])
    # Chunks aim for 125 tokens, 10 % of documents-passes aim for a random shorter target.
    assert 0.6 < np.mean(lengths >= 120) < 0.95
    assert 0.02 < np.mean(lengths < 64) < 0.2


def test_round_trip_every_segment_is_contiguous_text_of_its_document(
    sample_shards, sample_documents, sample_vocab
):
    vocab = load_vocab(str(sample_vocab))
    streams = {}
    for directory in sample_documents:
        for path in sorted(directory.glob("documents-*.parquet")):
            table = pq.read_table(path, columns=[DocumentColumn.ID, DocumentColumn.SENTENCES])
            for doc_id, sentences in zip(*(c.to_pylist() for c in table.columns), strict=True):
                encoded = vocab.tokenizer.encode_batch_fast(sentences, add_special_tokens=False)
                stream = [t for e in encoded for t in e.ids]
                streams[doc_id] = np.array(stream, dtype="<u4").tobytes()

    def contiguous_in(tokens: np.ndarray, doc_id: str) -> bool:
        needle = tokens.astype("<u4").tobytes()
        haystack = streams[doc_id]
        start = haystack.find(needle)
        while start != -1 and start % 4:
            start = haystack.find(needle, start + 1)
        return start != -1

    found = read_examples(sample_shards, "seq128", "train")[:400]
    for e in found:
        restored = e.input_ids.astype(np.int64)
        restored[e.masked_lm_positions] = e.masked_lm_ids
        a = e.segment_a_length
        assert contiguous_in(restored[1 : a - 1], e.doc_a), e.key
        assert contiguous_in(restored[a:-1], e.doc_b), e.key


def test_same_inputs_give_identical_bytes_in_process_and_with_two_worker_processes(
    tmp_path, sample_documents, sample_vocab
):
    flags = ("--dupe-factor", "2", "--samples-per-shard", "4000", "--partner-group-docs", "20")
    one, two = tmp_path / "in-process", tmp_path / "two-workers"
    assert run_examples(sample_documents, sample_vocab, one, *flags) == 0
    assert (
        run_examples(
            sample_documents,
            sample_vocab,
            two,
            *flags,
            "--direct_num_workers",
            "2",
            "--direct_running_mode",
            "multi_processing",
        )
        == 0
    )
    files_one = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    files_two = sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    assert files_one == files_two and len(files_one) > 3
    for relative in files_one:
        assert (one / relative).read_bytes() == (two / relative).read_bytes(), relative


def test_whole_word_masking_masks_every_piece_of_a_chosen_word(
    tmp_path, sample_documents, sample_vocab
):
    vocab = load_vocab(str(sample_vocab))
    output = tmp_path / "wwm"
    assert (
        run_examples(
            sample_documents, sample_vocab, output, "--dupe-factor", "1", "--whole-word-mask"
        )
        == 0
    )
    found = read_examples(output, "seq128", "train")
    assert load_manifest(output).config["whole_word_mask"] is True
    pieces = 0
    for e in found:
        restored = e.input_ids.astype(np.int64)
        restored[e.masked_lm_positions] = e.masked_lm_ids
        chosen = set(e.masked_lm_positions.tolist())
        continuation = vocab.is_continuation[restored]
        for p in chosen:
            # A chosen piece's whole word is chosen: its "##" neighbours on both sides.
            if continuation[p]:
                pieces += 1
                # …unless truncation cut the word: then it starts right after [CLS] / [SEP].
                assert p - 1 in chosen or p - 1 in (0, e.segment_a_length - 1)
            if p + 1 < len(restored) and continuation[p + 1]:
                assert p + 1 in chosen
    assert pieces > 100


# --- literal documents --------------------------------------------------------------------


def write_documents(directory: Path, documents: list[Document]) -> Path:
    directory.mkdir(parents=True)
    path = directory / "documents-00000-0000.parquet"
    pq.write_table(documents_table(documents), path)
    data = path.read_bytes()
    text_bytes = sum(len(s.encode()) for d in documents for s in d.sentences)
    manifest = DocumentsManifest(
        stage="books",
        inputs=[],
        config={},
        counts={"documents": len(documents), "text_bytes": text_bytes},
        dropped={},
        rejected={},
        failed_inputs=[],
        files=[
            OutputFile(
                name=path.name,
                documents=len(documents),
                sentences=sum(len(d.sentences) for d in documents),
                text_bytes=text_bytes,
                bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        ],
    )
    (directory / MANIFEST_NAME).write_text(manifest.to_json())
    return directory


def literal_document(doc_id: str, *sentences: str) -> Document:
    return Document(id=doc_id, source="test", title=doc_id, sentences=tuple(sentences))


def test_one_sentence_and_one_token_documents_make_examples_and_empty_ones_are_rejected(
    tmp_path, sample_vocab
):
    story = [f"The river number {i} runs through the old town and into the sea." for i in range(12)]
    documents = write_documents(
        tmp_path / "documents",
        [
            literal_document("t/solo", "A single sentence is a whole document here."),
            literal_document("t/tiny", "word"),
            literal_document("t/blank", "\x00\x01", "\x07"),
            literal_document("t/story-a", *story),
            literal_document("t/story-b", *story[::-1]),
        ],
    )
    output = tmp_path / "shards"
    flags = ("--max-seq-length", "32", "--dupe-factor", "2", "--heldout-fraction", "0")
    assert run_examples([documents], sample_vocab, output, *flags) == 0
    manifest = load_manifest(output)
    assert manifest.rejected == {"document_without_tokens": 1}
    assert manifest.counts["documents"] == 5 and manifest.counts["documents_train"] == 4
    (rejects_file,) = manifest.rejects_files
    (reject,) = [json.loads(line) for line in (output / rejects_file).read_text().splitlines()]
    assert reject["id"] == "t/blank" and reject["reason"] == "document_without_tokens"
    assert reject["input"].endswith("documents-00000-0000.parquet")
    found = read_examples(output, "seq32", "train")
    by_document = Counter((e.doc_a, e.next_sentence_label) for e in found)
    # One sentence (or one token) is one chunk: always a random next, once per pass.
    assert by_document[("t/solo", NOT_NEXT)] == 2 and by_document[("t/solo", 0)] == 0
    assert by_document[("t/tiny", NOT_NEXT)] == 2
    tiny = next(e for e in found if e.doc_a == "t/tiny")
    assert tiny.segment_a_length == 3  # [CLS] word [SEP]
    assert {e.doc_a for e in found} == {"t/solo", "t/tiny", "t/story-a", "t/story-b"}


def test_write_shards_orders_buckets_and_joins_a_shard_that_straddles_two(tmp_path, test_pipeline):
    config = examples.ExamplesConfig(
        documents=(),
        vocab="",
        output=str(tmp_path / "out"),
        max_seq_lengths=(128,),
        max_predictions_per_seq=(19,),
        samples_per_shard=2,
    )
    bucket0, bucket1 = tmp_path / "b0.bin", tmp_path / "b1.bin"
    write_file(str(bucket0), pack_example(5, b"five") + pack_example(1, b"one"))
    write_file(str(bucket1), pack_example(3, b"three"))
    spills = [(("seq128/train", 0), str(bucket0)), (("seq128/train", 1), str(bucket1))]
    counts = [(("seq128/train", 0), 2), (("seq128/train", 1), 1)]
    shards = (
        test_pipeline | "Spills" >> beam.Create(spills),
        test_pipeline | "Counts" >> beam.Create(counts),
    ) | examples.WriteShards(config, Planned.now(ExamplesPlan((), None, None, ONE_LEVEL)))
    # 3 samples, at most 2 per shard → 2 shards of 1 and 2; bucket 0 sorted (1, 5) then
    # bucket 1 (3): shard 0 = [one], shard 1 = [five | three] joined from both buckets.
    assert_that(
        shards | beam.Map(lambda s: (s["path"], s["samples"], s["first_key"])),
        equal_to(
            [
                ("seq128/train/shard-000000.tar", 1, sample_key(0)),
                ("seq128/train/shard-000001.tar", 2, sample_key(1)),
            ]
        ),
    )
    test_pipeline.run().wait_until_finish()
    out = tmp_path / "out" / "seq128" / "train"
    with open(out / "shard-000001.tar", "rb") as stream:
        assert list(iter_tar_samples(stream, "shard-000001.tar")) == [
            (sample_key(1), b"five"),
            (sample_key(2), b"three"),
        ]


def test_keys_are_typed_tuples_named_as_spill_folders():
    key = examples.PartitionKey("train", 3, 2)
    assert key == ("train", 3, 2) and key.name == "train/p00003/q00002"
    assert examples.BucketKey("seq128/heldout", 7).name == "seq128/heldout/b00007"
    # the folders sort as the keys do (zero-padded numbers)
    keys = [examples.PartitionKey(s, p, q) for s in SPLITS for p in (10, 2) for q in (11, 1)]
    assert [k.name for k in sorted(keys)] == sorted(k.name for k in keys)
    buckets = [
        examples.BucketKey(split_dir(n, s), b) for n in (1024, 128) for s in SPLITS for b in (12, 3)
    ]
    assert [k.name for k in sorted(buckets)] == sorted(k.name for k in buckets)


def test_keyed_spill_writer_writes_under_the_key_name_and_hands_back_plain_tuples(tmp_path):
    writer = KeyedSpillWriter(str(tmp_path), "d000-f00001", budget_bytes=1 << 20)
    writer.add(examples.PartitionKey("train", 1, 0), b"b")
    writer.add(examples.PartitionKey("heldout", 0, 2), b"a")
    writer.add(examples.PartitionKey("train", 1, 0), b"c")
    written = writer.close()
    assert written == [
        (("heldout", 0, 2), str(tmp_path / "heldout/p00000/q00002/d000-f00001-00000.bin")),
        (("train", 1, 0), str(tmp_path / "train/p00001/q00000/d000-f00001-00000.bin")),
    ]
    assert all(type(key) is tuple for key, _ in written)  # Beam's deterministic coder
    assert (tmp_path / "train/p00001/q00000/d000-f00001-00000.bin").read_bytes() == b"bc"


def test_shard_bounds_are_equal_within_one():
    assert examples.shard_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert examples.shard_count(10, 4) == 3
    assert examples.shard_count(0, 4) == 0


# --- bad input ----------------------------------------------------------------------------


def test_missing_vocab_is_a_clear_error(tmp_path, sample_documents, capsys):
    assert run_examples(sample_documents, tmp_path / "no-vocab", tmp_path / "out") == 2
    error = capsys.readouterr().err
    assert "no-vocab" in error and "bertkit vocab" in error


def test_modified_vocab_is_refused(tmp_path, sample_documents, sample_vocab, capsys):
    import shutil

    vocab = tmp_path / "vocab"
    shutil.copytree(sample_vocab, vocab)
    with open(vocab / "vocab.txt", "a") as text:
        text.write("extra\n")
    assert run_examples(sample_documents, vocab, tmp_path / "out") == 2
    assert "modified after training" in capsys.readouterr().err


def test_documents_directory_without_a_manifest_is_refused(tmp_path, sample_vocab, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_examples([empty], sample_vocab, tmp_path / "out") == 2
    error = capsys.readouterr().err
    assert f"documents directory {empty} is empty" in error and "bertkit wikipedia" in error


def test_flag_lists_must_match_and_output_must_be_new(
    tmp_path, sample_shards, sample_documents, sample_vocab, capsys
):
    flags = ("--max-seq-length", "128,512", "--max-predictions-per-seq", "20")
    assert run_examples(sample_documents, sample_vocab, tmp_path / "out", *flags) == 2
    assert "one per length" in capsys.readouterr().err
    assert run_examples(sample_documents, sample_vocab, sample_shards) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_overwrite_deletes_only_what_an_earlier_run_wrote(
    tmp_path, sample_shards, sample_documents, sample_vocab, capsys
):
    import shutil

    output = shutil.copytree(sample_shards, tmp_path / "shards")
    theirs = output / "seq2seq" / "models" / "weights.bin"  # matched `seq*/*/*` before
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"not ours")
    (output / "_work").mkdir()
    (output / "_work" / "notes.txt").write_text("not ours either")
    shards = sorted(output.glob("seq128/*/*.tar"))
    assert run_examples(sample_documents, sample_vocab, output, "--overwrite") == 2
    error = capsys.readouterr().err
    assert f"{output} holds _work/notes.txt and 1 more files, which `bertkit examples`" in error
    assert "nothing was deleted" in error
    assert theirs.read_bytes() == b"not ours" and all(s.is_file() for s in shards)
