"""`bertkit examples --sequences full-sentences` and `--masking none`: the packing rule on
literal sentence lengths, then the stage on the real sample, end to end.

What a correct run on the sample looks like (8,000-token vocab, 5 % held out, one partner
group per split): 6,595 train sequences at 128 and 1,630 at 512, every one full but the last
of its split and the few where a document ends one token before the end; 0 predictions,
every segment id 0, and the train split's sequences are its documents' tokens, in id order,
each token exactly once.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines.bert.packing import Piece, pack_sequences, packed_input_ids, sequence_length
from pipelines.examples.manifest import DEVIATIONS
from pipelines.examples.plan import split_of
from pipelines.io.vocabulary import load_vocab
from schemas import DocumentColumn, ShardsManifest
from schemas.checks import RecordError
from schemas.examples import NOT_NEXT
from tests.test_examples import (
    literal_document,
    load_manifest,
    read_examples,
    run_examples,
    write_documents,
)

CLS, SEP = 2, 3
HELDOUT = 0.05
FULL_FLAGS = (
    "--max-seq-length",
    "128,512",
    "--sequences",
    "full-sentences",
    "--masking",
    "none",
    "--dupe-factor",
    "1",
    "--heldout-fraction",
    str(HELDOUT),
    "--samples-per-shard",
    "2000",
)


# --- the packing rule, on literal sentence lengths ----------------------------------------


def test_sequences_fill_the_length_cross_documents_and_carry_a_cut_sentence_on():
    # Three documents of 7, 2 and 6 tokens; at 8 a sequence holds 6 tokens besides [CLS]
    # and its closing [SEP], less one [SEP] per document boundary inside it.
    documents = [[3, 4], [2], [5, 1]]
    assert list(pack_sequences(documents, 8)) == [
        # document 0's second sentence (tokens 3 to 6) is cut after its third token …
        [Piece(0, 0, 6)],
        # … and ends at the start of the next sequence: [CLS] t6 [SEP] d1 [SEP] d2[0] [SEP]
        [Piece(0, 6, 7), Piece(1, 0, 2), Piece(2, 0, 1)],
        # the stream's last sequence is the only short one
        [Piece(2, 1, 6)],
    ]
    assert [sequence_length(p) for p in pack_sequences(documents, 8)] == [8, 8, 7]


def test_a_sentence_longer_than_a_sequence_is_cut_into_pieces():
    assert list(pack_sequences([[20]], 8)) == [
        [Piece(0, 0, 6)],
        [Piece(0, 6, 12)],
        [Piece(0, 12, 18)],
        [Piece(0, 18, 20)],
    ]


def test_a_document_ending_one_token_before_the_end_closes_its_sequence():
    # 5 tokens leave 1 of the 6: no room for a [SEP] and a token of the next document.
    assert list(pack_sequences([[5], [3]], 8)) == [[Piece(0, 0, 5)], [Piece(1, 0, 3)]]
    # 6 tokens fill it exactly: the closing [SEP] ends document 0, no separator is spent.
    assert list(pack_sequences([[6], [3]], 8)) == [[Piece(0, 0, 6)], [Piece(1, 0, 3)]]


def test_documents_without_tokens_add_nothing_and_no_documents_make_no_sequence():
    assert list(pack_sequences([[], [2], [], [1]], 8)) == [[Piece(1, 0, 2), Piece(3, 0, 1)]]
    assert list(pack_sequences([], 8)) == [] == list(pack_sequences([[], []], 8))
    with pytest.raises(ValueError, match="at least 3"):
        next(pack_sequences([[4]], 2))


def test_packed_input_ids_put_a_sep_between_documents_and_at_the_end():
    tokens = [np.array([10, 11, 12, 13]), np.array([20, 21]), np.array([30])]
    pieces = [Piece(0, 2, 4), Piece(1, 0, 2), Piece(2, 0, 1)]
    ids, special = packed_input_ids(pieces, tokens, CLS, SEP)
    assert ids.tolist() == [CLS, 12, 13, SEP, 20, 21, SEP, 30, SEP]
    assert special == [0, 3, 6, 8] and ids.dtype == np.int64


@pytest.mark.parametrize("length", [8, 13, 128])
def test_every_token_is_packed_once_in_order_and_only_the_last_or_a_gap_is_short(length):
    rng = np.random.default_rng(length)
    documents = [
        rng.integers(1, 40, size=rng.integers(0, 6)).tolist() for _ in range(rng.integers(1, 60))
    ]
    sequences = list(pack_sequences(documents, length))
    # Their pieces, read in order, are every document's tokens in order, each once.
    covered = [
        (p.document, t) for pieces in sequences for p in pieces for t in range(p.start, p.end)
    ]
    expected = [(d, t) for d, lengths in enumerate(documents) for t in range(sum(lengths))]
    assert covered == expected
    for number, pieces in enumerate(sequences):
        size = sequence_length(pieces)
        assert size <= length and all(p.end > p.start for p in pieces)
        ends_a_document = pieces[-1].end == sum(documents[pieces[-1].document])
        if number < len(sequences) - 1:
            # full, or a document ends one token short of full (no room for [SEP] + token)
            assert size == length or (size == length - 1 and ends_a_document)


# --- the real sample, end to end -------------------------------------------------------------


@pytest.fixture(scope="module")
def full_shards(tmp_path_factory, sample_documents, sample_vocab):
    output = tmp_path_factory.mktemp("full") / "shards"
    assert run_examples(sample_documents, sample_vocab, output, *FULL_FLAGS) == 0
    return output


@pytest.fixture(scope="module")
def document_tokens(sample_documents, sample_vocab) -> dict[str, np.ndarray]:
    """Every sample document's token ids, sentence after sentence, as the stage makes them."""
    vocab = load_vocab(str(sample_vocab))
    tokens = {}
    for directory in sample_documents:
        for path in sorted(directory.glob("documents-*.parquet")):
            table = pq.read_table(path, columns=[DocumentColumn.ID, DocumentColumn.SENTENCES])
            for doc_id, sentences in zip(*(c.to_pylist() for c in table.columns), strict=True):
                encoded = vocab.tokenizer.encode_batch_fast(sentences, add_special_tokens=False)
                tokens[doc_id] = np.array([t for e in encoded for t in e.ids], dtype=np.int64)
    return tokens


def test_the_manifest_says_full_sentences_without_masks(full_shards):
    text = (full_shards / "manifest.json").read_text()
    raw = json.loads(text)
    assert (raw["sequences"], raw["masking"]) == ("full-sentences", "none")
    assert (raw["config"]["sequences"], raw["config"]["masking"]) == ("full-sentences", "none")
    assert raw["config"]["max_predictions_per_seq"] == []
    manifest = load_manifest(full_shards)
    assert (manifest.sequences, manifest.masking) == ("full-sentences", "none")
    assert manifest.deviations[0].startswith("masks: none stored")
    assert any("RoBERTa packs whole sentences and pads" in d for d in manifest.deviations)
    assert manifest.layout["splits"]["train"]["groups"] == 1  # the sample: one stream a split
    for name, output in manifest.outputs.items():
        assert output.max_predictions_per_seq == 0
        for split, shards in output.splits.items():
            assert (shards.not_next, shards.predictions) == (0, 0), (name, split)
            assert shards.samples > 0 and manifest.counts[f"{name}/{split}/short_sequences"] >= 1
    assert manifest.rejected == {}


def test_every_sequence_is_one_segment_of_its_documents_text_in_id_order(
    full_shards, document_tokens, sample_vocab
):
    vocab = load_vocab(str(sample_vocab))
    manifest = load_manifest(full_shards)
    for length in (128, 512):
        for split in ("train", "heldout"):
            found = read_examples(full_shards, f"seq{length}", split)
            # The split's documents in id order are one stream, packed as the rule says.
            members = sorted(i for i in document_tokens if split_of(i, HELDOUT) == split)
            tokens = [document_tokens[i] for i in members]
            lengths = [[len(t)] for t in tokens]
            expected = [
                (packed_input_ids(p, tokens, vocab.cls_id, vocab.sep_id)[0], p)
                for p in pack_sequences(lengths, length)
            ]
            assert sorted(e.input_ids.astype(np.int64).tobytes() for e in found) == sorted(
                ids.tobytes() for ids, _ in expected
            )
            provenance = {
                ids.tobytes(): (members[p[0].document], members[p[-1].document])
                for ids, p in expected
            }
            short = 0
            for e in found:
                ids = e.input_ids.astype(np.int64)
                assert e.segment_a_length == len(ids) and not e.segment_ids.any()
                assert e.next_sentence_label == 0 and e.dupe_pass == 0
                assert len(e.masked_lm_positions) == len(e.masked_lm_ids) == 0
                assert ids[0] == vocab.cls_id and ids[-1] == vocab.sep_id
                assert (e.doc_a, e.doc_b) == provenance[ids.tobytes()]
                short += len(ids) < length
            # every token of the split, once, plus [CLS], the closing [SEP] and a [SEP] per
            # document boundary inside a sequence
            content = sum(
                len(e.input_ids) - 1 - int((e.input_ids == vocab.sep_id).sum()) for e in found
            )
            assert content == sum(len(t) for t in tokens)
            assert short == manifest.counts[f"seq{length}/{split}/short_sequences"]


def test_padding_is_under_one_percent_at_128_and_512(full_shards):
    manifest = load_manifest(full_shards)
    for output in manifest.outputs.values():
        splits = output.splits.values()
        train = output.splits["train"]
        whole = sum(s.tokens for s in splits) / sum(
            s.samples * output.max_seq_length for s in splits
        )
        assert 1 - whole < 0.01
        assert 1 - train.tokens / (train.samples * output.max_seq_length) < 0.01


def test_the_trainer_s_loader_takes_full_sentence_samples(full_shards):
    from schemas.batch import IGNORE_INDEX, BatchField
    from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source

    source = open_source(str(full_shards), "train", 128)
    batch = next(iter(PretrainingLoader(source, LoaderConfig(16, seed=0)).epoch(DataPosition())))
    assert batch[BatchField.INPUT_IDS].shape == (16, 128)
    assert not batch[BatchField.TOKEN_TYPE_IDS].any()  # one segment
    assert not batch[BatchField.NEXT_SENTENCE_LABELS].any()
    assert (batch[BatchField.MASKED_LABELS] == IGNORE_INDEX).all()  # nothing stored


def test_same_bytes_in_process_and_with_two_worker_processes(
    tmp_path, sample_documents, sample_vocab
):
    # Five partner groups in train, so five streams, spread over partitions and workers.
    flags = (*FULL_FLAGS, "--partner-group-docs", "20", "--work-partition-mb", "1")
    one, two = tmp_path / "in-process", tmp_path / "two-workers"
    assert run_examples(sample_documents, sample_vocab, one, *flags) == 0
    workers = ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")
    assert run_examples(sample_documents, sample_vocab, two, *flags, *workers) == 0
    files_one = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    files_two = sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    assert files_one == files_two and len(files_one) > 3
    for relative in files_one:
        assert (one / relative).read_bytes() == (two / relative).read_bytes(), relative
    manifest = load_manifest(one)
    assert manifest.layout["splits"]["train"]["groups"] == 5
    for output in manifest.outputs.values():
        train = output.splits["train"]
        assert 1 - train.tokens / (train.samples * output.max_seq_length) < 0.01


def test_static_masks_on_full_sentences_follow_google_s_rule(
    tmp_path, full_shards, sample_documents, sample_vocab
):
    vocab = load_vocab(str(sample_vocab))
    output = tmp_path / "masked"
    flags = ("--max-seq-length", "128", "--sequences", "full-sentences", "--dupe-factor", "2")
    flags += ("--heldout-fraction", str(HELDOUT))
    assert run_examples(sample_documents, sample_vocab, output, *flags) == 0
    manifest = load_manifest(output)
    assert (manifest.sequences, manifest.masking) == ("full-sentences", "static")
    assert "masking" not in json.loads((output / "manifest.json").read_text())
    found = read_examples(output, "seq128", "train")
    restored = []
    for e in found:
        ids = e.input_ids.astype(np.int64)
        positions = e.masked_lm_positions.astype(np.int64)
        # over the whole sequence: round(n × 0.15), at most 19, never [CLS] or a [SEP]
        assert len(positions) == min(19, max(1, round(len(ids) * 0.15)))
        ids[positions] = e.masked_lm_ids
        assert not np.isin(ids[positions], [vocab.cls_id, vocab.sep_id]).any()
        restored.append(ids.tobytes())
    # One group, so both passes pack the same sequences, masked differently each time.
    unmasked = [
        e.input_ids.astype(np.int64).tobytes()
        for e in read_examples(full_shards, "seq128", "train")
    ]
    assert sorted(restored) == sorted(unmasked * 2)
    assert sum(e.predictions for e in manifest.outputs["seq128"].splits.values()) > 0


def test_a_one_sentence_corpus_makes_one_sequence(tmp_path, sample_vocab):
    # Pairs need a partner document; a full-sentence sequence does not.
    documents = write_documents(
        tmp_path / "documents", [literal_document("t/solo", "A single sentence is all there is.")]
    )
    output = tmp_path / "shards"
    flags = ("--max-seq-length", "32", "--sequences", "full-sentences", "--masking", "none")
    flags += ("--dupe-factor", "1", "--heldout-fraction", "0")
    assert run_examples([documents], sample_vocab, output, *flags) == 0
    (example,) = read_examples(output, "seq32", "train")
    assert (example.doc_a, example.doc_b) == ("t/solo", "t/solo")
    assert load_manifest(output).rejected == {}


# --- sentence pairs without masks ------------------------------------------------------------


def test_pairs_without_masks_keep_their_label_and_differ_every_pass(
    tmp_path, sample_documents, sample_vocab
):
    output = tmp_path / "pairs"
    flags = ("--max-seq-length", "128", "--masking", "none", "--dupe-factor", "2")
    flags += ("--heldout-fraction", str(HELDOUT))
    assert run_examples(sample_documents, sample_vocab, output, *flags) == 0
    raw = json.loads((output / "manifest.json").read_text())
    assert raw["masking"] == "none" and "sequences" not in raw
    manifest = load_manifest(output)
    assert manifest.sequences == "pairs" and manifest.outputs["seq128"].max_predictions_per_seq == 0
    found = read_examples(output, "seq128", "train")
    assert not any(len(e.masked_lm_positions) for e in found)
    assert 0.45 < sum(e.next_sentence_label == NOT_NEXT for e in found) / len(found) < 0.6
    assert all(e.segment_a_length < len(e.input_ids) for e in found)  # two segments
    # Each pass pairs anew (targets, A/B splits, partners): not copies of one another.
    passes = [{e.input_ids.tobytes() for e in found if e.dupe_pass == p} for p in (0, 1)]
    assert len(passes[0] & passes[1]) < 0.5 * len(passes[0])


# --- the defaults, unchanged ---------------------------------------------------------------

# The session's sample shards (tests/support/sample.py: pairs, static masks, 128, dupe 2),
# as made before --sequences and --masking existed: each shard's path, sha256 and block
# table sha256, and the manifest without its paths. If an upstream stage changed the
# sample's documents or vocabulary on purpose, these change too; otherwise pair shards did.
PAIR_SHARDS_SHA256 = "cfc5f8a155eeb05fe24ef61fa76175fbe5db038563a3fbd9bd7cb4aaad0fdf59"
PAIR_MANIFEST_SHA256 = "f48c3fe42b7bcfa7f36996b3381103a55a68f41b677bddc73c20adea102b829e"
TRUNCATED = {"seq128/heldout/truncated_tokens": 8354, "seq128/train/truncated_tokens": 254953}


def test_pair_shards_and_manifest_are_byte_identical_to_before(sample_shards):
    text = (sample_shards / "manifest.json").read_text()
    manifest = ShardsManifest.from_json(text)
    assert (manifest.sequences, manifest.masking) == ("pairs", "static")
    assert manifest.to_json() == text  # read and written again: the same bytes
    raw = json.loads(text)
    assert not {"sequences", "masking"} & (set(raw) | set(raw["config"]))
    assert raw["deviations"] == DEVIATIONS
    rows = "".join(
        f"{s.path} {s.sha256} {s.block_table.sha256}\n"
        for s in sorted(manifest.all_shards(), key=lambda s: s.path)
    )
    assert hashlib.sha256(rows.encode()).hexdigest() == PAIR_SHARDS_SHA256
    del raw["inputs"]  # their manifests' sha256s hold the sample's absolute path
    raw["config"]["documents"], raw["config"]["vocab"], raw["vocab"]["path"] = [], "", ""
    # Counted since (the tokens trimmed off pairs): every other byte is as it was.
    truncated = {
        k: raw["counts"].pop(k) for k in list(raw["counts"]) if k.endswith("/truncated_tokens")
    }
    assert truncated == TRUNCATED
    portable = json.dumps(raw, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert hashlib.sha256(portable.encode()).hexdigest() == PAIR_MANIFEST_SHA256


def test_the_defaults_given_outright_change_no_byte(
    tmp_path, sample_shards, sample_documents, sample_vocab
):
    flags = ("--max-seq-length", "128", "--dupe-factor", "2", "--heldout-fraction", "0.05")
    flags += ("--samples-per-shard", "2000", "--sequences", "pairs", "--masking", "static")
    output = tmp_path / "explicit"
    assert run_examples(sample_documents, sample_vocab, output, *flags) == 0
    files = sorted(p.relative_to(output) for p in output.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(sample_shards) for p in sample_shards.rglob("*") if p.is_file()
    )
    for relative in files:
        assert (output / relative).read_bytes() == (sample_shards / relative).read_bytes()


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--sequences", "full-sentences", "--masking", "none"),
            "--dupe-factor 10 with --sequences full-sentences --masking none would store the "
            "same text again, without masks to tell the copies apart: give --dupe-factor 1",
        ),
        (
            ("--masking", "none", "--whole-word-mask"),
            "--whole-word-mask shapes stored masks, and --masking none stores none: drop it",
        ),
        (
            ("--masking", "none", "--max-predictions-per-seq", "20"),
            "--max-predictions-per-seq shapes stored masks, and --masking none stores none",
        ),
        (
            ("--masking", "none", "--masked-lm-prob", "0.2"),
            "--masked-lm-prob shapes stored masks, and --masking none stores none",
        ),
        (
            ("--sequences", "full-sentences", "--short-seq-prob", "0.2"),
            "--short-seq-prob 0.2 draws short targets for sentence pairs; --sequences "
            "full-sentences fills every sequence to --max-seq-length: drop it",
        ),
    ],
)
def test_flags_that_mean_nothing_for_the_kind_are_refused(
    flags, message, tmp_path, sample_documents, sample_vocab, capsys
):
    assert run_examples(sample_documents, sample_vocab, tmp_path / "out", *flags) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_unknown_kind_is_refused_by_the_parser(tmp_path, sample_documents, sample_vocab, capsys):
    with pytest.raises(SystemExit) as refused:
        run_examples(sample_documents, sample_vocab, tmp_path / "out", "--sequences", "packed")
    assert refused.value.code == 2
    assert "--sequences: invalid choice: 'packed'" in capsys.readouterr().err


def test_a_manifest_whose_kind_contradicts_its_counts_is_refused(full_shards, sample_shards):
    full = json.loads((full_shards / "manifest.json").read_text())
    pairs = json.loads((sample_shards / "manifest.json").read_text())
    cases = [
        (pairs, "sequences", "packed", "sequences is 'packed': one of 'pairs', 'full-sentences'"),
        (pairs, "masking", "dynamic", "masking is 'dynamic': one of 'static', 'none'"),
        # masked pairs said to hold no masks: their predictions contradict it
        (pairs, "masking", "none", "max_predictions_per_seq is 19: samples made with masking"),
        # pairs said to be full sentences: their NotNext count contradicts it
        (pairs, "sequences", "full-sentences", "full-sentence sequences have no next-sentence"),
        # unmasked sequences said to be masked: no max_predictions_per_seq of 1 or more
        (full, "masking", "static", "max_predictions_per_seq is 0: it must be at least 1"),
    ]
    for raw, name, value, message in cases:
        with pytest.raises(RecordError, match=message.replace("(", r"\(")):
            ShardsManifest.from_json(json.dumps({**raw, name: value}))
