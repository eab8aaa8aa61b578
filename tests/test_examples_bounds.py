"""`bertkit examples` at the edges: a corpus of one sentence, flags that mean nothing, and
documents or sentences of any length in bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from pipelines.bert.sentence_cuts import MAX_SENTENCE_CHARS, cut_sentence
from pipelines.bert.words_once import encode_in_calls
from pipelines.examples import ExamplesConfig, ExamplesConfigError
from pipelines.io.vocabulary import load_vocab
from schemas.examples import NOT_NEXT
from tests.test_examples import (
    literal_document,
    load_manifest,
    read_examples,
    run_examples,
    write_documents,
)

# --- a corpus of one sentence -------------------------------------------------------------


def test_a_corpus_of_one_sentence_runs_and_says_why_it_made_no_example(
    tmp_path, sample_vocab, capsys
):
    # Its one chunk needs a NotNext partner in every pass, and there is no other document:
    # masking got no input at all, and `np.concatenate` of nothing crashed the stage.
    documents = write_documents(
        tmp_path / "documents", [literal_document("t/solo", "A single sentence is all there is.")]
    )
    output = tmp_path / "shards"
    flags = ("--max-seq-length", "32", "--dupe-factor", "2", "--heldout-fraction", "0")
    assert run_examples([documents], sample_vocab, output, *flags) == 0
    manifest = load_manifest(output)
    assert manifest.rejected == {"no_partner_document": 2}  # once per pass
    assert (manifest.counts["documents"], manifest.counts["documents_with_one_sentence"]) == (1, 1)
    assert {split: s.samples for split, s in manifest.outputs["seq32"].splits.items()} == {
        "train": 0,
        "heldout": 0,
    }
    rejects = [
        json.loads(line)
        for name in manifest.rejects_files
        for line in (output / name).read_text().splitlines()
    ]
    assert [(r["id"], r["reason"], r["position"]) for r in rejects] == [
        ("t/solo", "no_partner_document", "pass 0, group 0"),
        ("t/solo", "no_partner_document", "pass 1, group 0"),
    ]
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{output}/manifest.json: no example was made: each split needs at least two documents "
        "(a NotNext pair takes its second segment from another document; see the rejects)"
    )


# --- flags that mean nothing --------------------------------------------------------------


def _problems(**flags) -> str:
    config = ExamplesConfig(documents=("d",), vocab="v", output="o", **flags)
    with pytest.raises(ExamplesConfigError) as refused:
        config.validate()
    return str(refused.value)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # Built in code, nan and inf reach the config: round(128 × nan) raised ValueError
        # (inf OverflowError) while the config was being made, before validate could speak.
        ({"masked_lm_prob": float("nan")}, "--masked-lm-prob nan: must be a finite number"),
        ({"masked_lm_prob": float("inf")}, "--masked-lm-prob inf: must be a finite number"),
        (
            {"masked_lm_prob": float("-inf"), "max_predictions_per_seq": (20,)},
            "--masked-lm-prob -inf: must be a finite number",
        ),
        ({"short_seq_prob": float("nan")}, "--short-seq-prob nan: must be a finite number"),
        ({"heldout_fraction": float("inf")}, "--heldout-fraction inf: must be a finite number"),
        ({"masked_lm_prob": 1.5}, "--masked-lm-prob 1.5: must be in (0, 1)"),
        ({"masked_lm_prob": 0.0}, "--masked-lm-prob 0.0: must be in (0, 1)"),
        ({"short_seq_prob": -0.1}, "--short-seq-prob -0.1: must be in [0, 1]"),
        ({"heldout_fraction": 1.0}, "--heldout-fraction 1.0: must be in [0, 1)"),
        ({"dupe_factor": 0}, "--dupe-factor 0: must be in [1, 65535]"),
        ({"samples_per_shard": 0}, "--samples-per-shard 0: must be at least 1"),
        ({"work_partition_mb": -1}, "--work-partition-mb -1: must be at least 1"),
        ({"bucket_mb": 0}, "--bucket-mb 0: must be at least 1"),
        # Unchecked before: a spill file per record, or a regroup step that never buffers.
        ({"spill_budget_mb": 0}, "--spill-budget-mb 0: must be at least 1"),
        ({"regroup_budget_mb": -5}, "--regroup-budget-mb -5: must be at least 1"),
        # Said once, not also as "must be at least 1".
        (
            {"partner_group_docs": 0},
            "--partner-group-docs 0: must be at least 2 (a NotNext needs a partner)",
        ),
        ({"max_predictions_per_seq": (0,)}, "--max-predictions-per-seq 0: must be at least 1"),
        (
            {"max_predictions_per_seq": (126,)},
            "--max-predictions-per-seq 126 at length 128: must be at most 125 (the positions "
            "that are not [CLS] or [SEP])",
        ),
        # round(128 × 0.99) = 127 named --max-predictions-per-seq, which was not given.
        (
            {"masked_lm_prob": 0.99},
            "--masked-lm-prob 0.99 predicts round(128 × 0.99) = 127 tokens at length 128, more "
            "than its 125 positions that are not [CLS] or [SEP]: lower it, or give "
            "--max-predictions-per-seq",
        ),
        # round(128 × 0.001) = 0 named the flag the user never gave.
        (
            {"masked_lm_prob": 0.001},
            "--masked-lm-prob 0.001 predicts round(128 × 0.001) = 0 tokens at length 128: "
            "raise it, or give --max-predictions-per-seq",
        ),
        (
            {"spill_budget_mb": 0, "short_seq_prob": float("nan")},
            "--short-seq-prob nan: must be a finite number; --spill-budget-mb 0: must be at "
            "least 1",
        ),
    ],
)
def test_every_number_is_checked_and_named_with_what_it_must_be(flags, message):
    assert _problems(**flags) == message


def test_the_default_flags_are_valid():
    ExamplesConfig(documents=("d",), vocab="v", output="o").validate()
    ExamplesConfig(
        documents=("d",),
        vocab="v",
        output="o",
        max_seq_lengths=(8, 128),
        max_predictions_per_seq=(5, 125),
    ).validate()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--spill-budget-mb", "0"), "--spill-budget-mb 0: must be at least 1"),
        (("--regroup-budget-mb", "-1"), "--regroup-budget-mb -1: must be at least 1"),
        (
            ("--max-seq-length", "32", "--max-predictions-per-seq", "30"),
            "--max-predictions-per-seq 30 at length 32: must be at most 29 (the positions "
            "that are not [CLS] or [SEP])",
        ),
        (
            ("--masked-lm-prob", "0.001"),
            "--masked-lm-prob 0.001 predicts round(128 × 0.001) = 0 tokens at length 128: "
            "raise it, or give --max-predictions-per-seq",
        ),
    ],
)
def test_the_command_refuses_them_in_one_line_before_any_work(
    flags, message, tmp_path, sample_documents, sample_vocab, capsys
):
    output = tmp_path / "shards"
    assert run_examples(sample_documents, sample_vocab, output, *flags) == 2
    assert capsys.readouterr().err == f"bertkit examples: {message}\n"
    assert not output.exists()


# --- a sentence or a document of any length -----------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "max_chars", "pieces"),
    [
        ("short", 5, ["short"]),
        ("", 5, [""]),
        ("aaa bbb ccc", 5, ["aaa ", "bbb ", "ccc"]),  # after the window's last space
        ("ab\tcd\nef gh", 6, ["ab\tcd\n", "ef gh"]),  # a tab or a line break is one too
        ("abcdefghij", 4, ["abcd", "efgh", "ij"]),  # no space: at the window's end
        (" abcdef", 3, [" ab", "cde", "f"]),  # a space that would leave an empty piece is not one
        ("a b c d", 3, ["a ", "b ", "c d"]),
    ],
)
def test_cut_sentence_cuts_after_the_last_space_of_each_window(sentence, max_chars, pieces):
    assert cut_sentence(sentence, max_chars) == pieces
    assert "".join(pieces) == sentence


def test_cut_sentence_refuses_a_bound_of_nothing():
    with pytest.raises(ValueError, match="max_chars 0: must be at least 1"):
        cut_sentence("a", 0)


def test_a_cut_at_spaces_keeps_every_token_of_the_sentence(sample_vocab):
    tokenizer = load_vocab(str(sample_vocab)).tokenizer
    sentence = " ".join(f"The river number {i} runs through the old town." for i in range(900))
    pieces = cut_sentence(sentence)
    assert (len(sentence), [len(p) for p in pieces]) == (43_089, [16_380, 16_384, 10_325])
    whole = tokenizer.encode(sentence, add_special_tokens=False).ids
    cut = [t for p in pieces for t in tokenizer.encode(p, add_special_tokens=False).ids]
    assert cut == whole and len(whole) == 10_093


class RecordingTokenizer:
    """Each call's texts; a text's ids are its characters' code points."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode_batch_fast(self, texts, add_special_tokens):
        assert add_special_tokens is False
        self.calls.append(list(texts))
        return [SimpleNamespace(ids=[ord(c) for c in t]) for t in texts]


def test_encode_in_calls_bounds_each_call_by_texts_and_characters():
    tokenizer = RecordingTokenizer()
    tokens, lengths = encode_in_calls(tokenizer, ["ab", "cde", "f", "ghijkl", "", "m"], 2, 4)
    # "ab" + "cde" is 5 characters; "cde" + "f" is 2 texts; "ghijkl" (6) goes alone.
    assert tokenizer.calls == [["ab"], ["cde", "f"], ["ghijkl"], ["", "m"]]
    assert tokens.dtype == np.uint32 and lengths.dtype == np.uint32
    assert "".join(map(chr, tokens.tolist())) == "abcdefghijklm"
    assert lengths.tolist() == [2, 3, 1, 6, 0, 1]
    nothing = RecordingTokenizer()
    tokens, lengths = encode_in_calls(nothing, [], 2, 4)
    assert (nothing.calls, tokens.tolist(), lengths.tolist()) == ([], [], [])


def test_a_long_sentence_is_cut_into_sentences_and_keeps_its_tokens(tmp_path, sample_vocab):
    # 43,089 characters without a full stop: 3 pieces, each longer than a chunk at 32, so
    # each is a chunk of its own, a random next once per pass (Google's script: one sentence,
    # one example per pass).
    giant = " ".join(f"The river number {i} runs through the old town." for i in range(900))
    story = [f"A boat number {i} sails along the coast to the harbour." for i in range(6)]
    documents = write_documents(
        tmp_path / "documents",
        [
            literal_document("t/giant", giant),
            literal_document("t/story-a", *story),
            literal_document("t/story-b", *story[::-1]),
        ],
    )
    output = tmp_path / "shards"
    flags = ("--max-seq-length", "32", "--dupe-factor", "2", "--heldout-fraction", "0")
    assert run_examples([documents], sample_vocab, output, *flags) == 0
    counts = load_manifest(output).counts
    assert (counts["sentences"], counts["sentences_cut"]) == (13, 1)
    assert counts["documents_with_one_sentence"] == 1  # the giant, cut or not
    assert counts["tokens"] == 10_093 + 2 * 6 * 16  # not one token lost to the cuts
    found = Counter(
        (e.doc_a, e.next_sentence_label) for e in read_examples(output, "seq32", "train")
    )
    assert (found[("t/giant", NOT_NEXT)], found[("t/giant", 0)]) == (6, 0)


# The command in a child of a child: RUSAGE_CHILDREN is then that one run's peak alone.
_PEAK_RSS = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "pipelines.examples", *sys.argv[1:]], check=True)
print(0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _peak_mb(documents, vocab, output) -> int:
    argv = [
        "--documents",
        str(documents),
        "--vocab",
        str(vocab),
        "--output",
        str(output),
        "--dupe-factor",
        "1",
        "--heldout-fraction",
        "0",
    ]
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *argv], capture_output=True, text=True, check=True
    )
    code, peak = result.stdout.split()[-2:]
    assert code == "0", result.stderr
    return int(peak)


def test_a_one_sentence_document_of_4_mb_costs_little_more_memory_than_a_small_one(
    tmp_path, sample_vocab
):
    # Tokenized at once, its 4.4 MB cost 391 MB more than a 12-byte sentence (~90 bytes a
    # character in the tokenizer; 6.9 GB for a 62 MB book); cut into 16,384-character
    # pieces, tokenized 1 M characters a call, 45 MB more (measured: 208 → 253 MB peak).
    words = np.random.default_rng(0).choice(["river", "town", "sea", "old", "bright"], 800_000)
    story = [f"A boat number {i} sails along the coast to the harbour." for i in range(6)]
    peaks = []
    for name, sentence in (("small", "A short one."), ("big", " ".join(words.tolist()))):
        documents = write_documents(
            tmp_path / name,
            [
                literal_document("t/one", sentence),
                literal_document("t/story-a", *story),
                literal_document("t/story-b", *story[::-1]),
            ],
        )
        peaks.append(_peak_mb(documents, sample_vocab, tmp_path / f"{name}-shards"))
    assert len(" ".join(words.tolist())) > 4_000_000 > MAX_SENTENCE_CHARS
    assert peaks[1] - peaks[0] < 150, peaks


# --- documents that share an id -----------------------------------------------------------


def test_documents_sharing_an_id_get_ids_of_their_own_and_never_pair_with_each_other(
    tmp_path, sample_vocab
):
    """Two corpus files numbering their records from 0 give two documents "c/0": the second
    (by its tokens) becomes "c/0#2", so it draws its own stream and is a NotNext partner
    like any other document, never its twin's "another document" under the same name."""
    sentences = [f"Sentence number {n} of the first text is here." for n in range(12)]
    others = [f"The second text says thing {n} about something else." for n in range(12)]
    third = [f"A third text talks of matter {n} in its own words." for n in range(12)]
    documents = write_documents(
        tmp_path / "documents",
        [
            literal_document("c/0", *others),
            literal_document("c/0", *sentences),
            literal_document("c/1", *third),
        ],
    )
    output = tmp_path / "shards"
    flags = ("--max-seq-length", "32", "--dupe-factor", "2", "--heldout-fraction", "0")
    assert run_examples([documents], sample_vocab, output, *flags) == 0
    manifest = load_manifest(output)
    assert manifest.counts["documents_renamed_shared_id"] == 1  # counted once, not per pass
    examples = read_examples(output, "seq32", "train")
    assert {e.doc_a for e in examples} == {"c/0", "c/0#2", "c/1"}
    assert [e for e in examples if e.next_sentence_label == NOT_NEXT and e.doc_b == e.doc_a] == []
    # Which copy is renamed depends on the texts alone, not on the order they were read in.
    swapped = write_documents(
        tmp_path / "swapped",
        [
            literal_document("c/0", *sentences),
            literal_document("c/0", *others),
            literal_document("c/1", *third),
        ],
    )
    assert run_examples([swapped], sample_vocab, tmp_path / "again", *flags) == 0
    again = read_examples(tmp_path / "again", "seq32", "train")
    assert sorted(e.encode(2) for e in again) == sorted(e.encode(2) for e in examples)


def test_a_renamed_copy_never_takes_an_id_another_document_has():
    """c/0 twice beside a document whose own id is c/0#2: the second copy becomes c/0#3."""
    from pipelines.beam.spill import TokenizedDocument
    from pipelines.examples.pairing import distinct_ids

    def document(doc_id: str, token: int) -> TokenizedDocument:
        return TokenizedDocument(doc_id, np.array([token], np.uint32), np.array([1], np.uint32))

    members = [document("c/0", 7), document("c/0", 5), document("c/0#2", 9)]
    assert distinct_ids(members) == 1
    assert [(m.id, int(m.tokens[0])) for m in members] == [("c/0", 5), ("c/0#3", 7), ("c/0#2", 9)]
