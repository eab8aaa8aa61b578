"""bench/train_step.py's comparison rows run on the CPU: transformers' BertForPreTraining as
the peer (--reference), LAMB beside AdamW (--optimizer), the loader's length bucketing
(--bucket-windows). The GPU figures come from the same code on a CUDA machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import train_step
from bench.train_step import RowSpec, build_model, model_inputs, transformers_labels
from schemas.batch import IGNORE_INDEX, BatchField
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source
from trainer.model import config_for, hf_state_dict

REPO = Path(__file__).resolve().parents[2]


def test_transformers_labels_put_each_masked_id_at_its_position():
    batch = {
        BatchField.INPUT_IDS: torch.tensor([[2, 7, 8, 9, 3, 0], [2, 5, 3, 6, 6, 3]]),
        BatchField.MASKED_POSITIONS: torch.tensor([[1, 3, 0], [4, 0, 0]]),
        BatchField.MASKED_LABELS: torch.tensor(
            [[17, 19, IGNORE_INDEX], [16, IGNORE_INDEX, IGNORE_INDEX]]
        ),
    }
    x = IGNORE_INDEX
    assert transformers_labels(batch).tolist() == [[x, 17, x, 19, x, x], [x, x, x, x, 16, x]]


def test_the_peer_computes_bertkit_s_loss_on_the_same_batch(sample_shards):
    """The same weights in both models, one real batch: the same loss, so the transformers
    row times the same work on the same inputs (labels, masks, token types)."""
    source = open_source(str(sample_shards))
    batch = next(PretrainingLoader(source, LoaderConfig(8, shuffle=False)).epoch(DataPosition()))
    config = config_for(
        "tiny",
        source.manifest.vocab["size"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    ours = build_model(RowSpec("tiny", False), config).eval()
    peer = build_model(RowSpec("tiny", False, implementation="transformers"), config).eval()
    missing, unexpected = peer.load_state_dict(hf_state_dict(ours), strict=False)
    assert not unexpected and all("decoder" in name for name in missing), missing
    peer.tie_weights()
    with torch.no_grad():
        loss = ours(**model_inputs(RowSpec("tiny", False), batch)).loss
        peer_loss = peer(**model_inputs(RowSpec("tiny", False, "adamw", "transformers"), batch))
    torch.testing.assert_close(peer_loss.loss, loss, atol=2e-5, rtol=0)


def test_reference_and_lamb_rows_run_with_their_ratio(tmp_path, capsys):
    out = tmp_path / "step.json"
    code = train_step.main(
        [
            "--model",
            "tiny",
            "--synthetic",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--repeats",
            "1",
            "--batches",
            "1",
            "--batch",
            "4",
            "--threads",
            "1",
            "--vocab-size",
            "500",
            "--reference",
            "--optimizer",
            "adamw,lamb",
            "--device",
            "cpu",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    written = json.loads(out.read_text())
    assert (written["rows_planned"], written["complete"]) == (4, True)
    rows = written["rows"]
    assert [(r["implementation"], r["optimizer"]) for r in rows] == [
        ("bertkit", "adamw"),
        ("transformers", "adamw"),
        ("bertkit", "lamb"),
        ("transformers", "lamb"),
    ]
    assert all(r["ok"] for r in rows)
    for ours, peer in (rows[0:2], rows[2:4]):
        ratio = ours["medians"]["seq_per_s"] / peer["medians"]["seq_per_s"]
        assert ours["vs_transformers"] == pytest.approx(ratio)
        assert peer["vs_transformers"] is None
    table = capsys.readouterr().out
    assert "| tiny  | transformers | eager | lamb" in table and "÷ transformers" in table


def test_bucketed_rows_read_batches_sorted_by_length(sample_shards, tmp_path):
    out = tmp_path / "step.json"
    code = train_step.main(
        [
            "--model",
            "tiny",
            "--shards",
            str(sample_shards),
            "--steps",
            "1",
            "--warmup",
            "0",
            "--repeats",
            "1",
            "--batches",
            "4",
            "--batch",
            "8",
            "--threads",
            "1",
            "--bucket-windows",
            "0,4",
            "--device",
            "cpu",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["bucket_window"] for r in rows] == [0, 4]
    # The same 32 samples in both (one window of 4 batches), fewer padded positions bucketed.
    assert rows[1]["mean_length"] <= rows[0]["mean_length"]


def test_bad_comparison_flags_are_refused(capsys):
    with pytest.raises(SystemExit):
        train_step.parse_args(["--optimizer", "adamw,sgd"])
    assert "--optimizer 'adamw,sgd'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_step.parse_args(["--synthetic", "--bucket-windows", "0,8"])
    assert "needs real batches" in capsys.readouterr().err


def test_a_run_stopped_after_its_first_row_keeps_that_row(tmp_path):
    """bench/gpu_check.sh stops a stage at its limit (timeout, then SIGKILL): the rows it
    finished are in its JSON, marked incomplete, as they were in the printed line."""
    out = tmp_path / "step.json"
    command = [sys.executable, "-m", "bench.train_step", "--model", "tiny", "--synthetic"]
    command += ["--modes", "eager,compiled", "--steps", "1", "--warmup", "0", "--repeats", "1"]
    command += ["--batches", "1", "--batch", "4", "--threads", "1", "--vocab-size", "500"]
    command += ["--device", "cpu", "--json", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "tiny bertkit eager" in line:
                break
        else:
            pytest.fail(f"no eager row line; exit {process.wait()}")
        process.kill()  # in the compiled row's compilation
    finally:
        process.kill()
        process.wait(timeout=30)
    written = json.loads(out.read_text())
    assert (written["rows_planned"], written["complete"]) == (2, False)
    assert [(r["model"], r["compiled"], r["ok"]) for r in written["rows"]] == [
        ("tiny", False, True)
    ]
    assert written["target"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.json"]
