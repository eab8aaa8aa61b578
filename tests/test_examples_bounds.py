"""`bertkit examples` at the edges: a corpus of one sentence, flags that mean nothing, and
documents or sentences of any length in bounded memory (issue 23)."""

from __future__ import annotations

import json

import pytest

from pipelines.examples import ExamplesConfig, ExamplesConfigError
from tests.test_examples import literal_document, load_manifest, run_examples, write_documents

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
        documents=("d",), vocab="v", output="o", max_seq_lengths=(8, 128),
        max_predictions_per_seq=(5, 125),
    ).validate()  # fmt: skip


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
