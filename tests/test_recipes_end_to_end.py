"""Today's recipes from the command line, end to end on the real sample: full-sentence shards
without masks, trained MLM-only with dynamic masks (what `auto` picks for them), in one
process and under torchrun with two processes; the refusals through the command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.support.torchrun import torchrun_env, torchrun_trainer
from tests.test_examples import run_examples
from tests.test_train import TINY, metrics
from trainer import train
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source
from trainer.run.checkpoints import latest_checkpoint

COMMON = ["--warmup-steps", "1", "--num-workers", "0", "--checkpoint-every", "100"]
RATE = 0.3  # MosaicBERT's rate: counts that differ from the stored 0.15's


@pytest.fixture(scope="module")
def roberta_shards(tmp_path_factory, sample_documents, sample_vocab) -> Path:
    """The sample as RoBERTa's data: full sentences at 128, no masks, one pass."""
    output = tmp_path_factory.mktemp("roberta") / "shards"
    flags = ["--sequences", "full-sentences", "--masking", "none", "--dupe-factor", "1"]
    flags += ["--heldout-fraction", "0.05", "--samples-per-shard", "2000"]
    assert run_examples(sample_documents, sample_vocab, output, *flags) == 0
    return output


def heldout_predictions(shards: Path, rate: float) -> int:
    """What the masking rule predicts over the whole held-out split: max(1, round(n × rate))
    a sequence ([CLS] and [SEP] counted)."""
    source = open_source(str(shards), "heldout")
    with PretrainingLoader(source, LoaderConfig(64, shuffle=False, drop_last=False)) as loader:
        lengths = np.concatenate(
            [b["attention_mask"].sum(dim=1).numpy() for b in loader.epoch(DataPosition())]
        )
    return int(sum(max(1, round(int(n) * rate)) for n in lengths))


def train_args(shards: Path, output: Path, steps: int, *extra: str) -> list[str]:
    return [
        *TINY,
        *COMMON,
        "--shards",
        str(shards),
        "--output",
        str(output),
        "--max-steps",
        str(steps),
        "--eval-batches",
        "0",
        "--mask-rate",
        str(RATE),
        *extra,
    ]


def test_roberta_recipe_in_one_process(roberta_shards, tmp_path):
    run_dir = tmp_path / "run"
    assert train.run(train_args(roberta_shards, run_dir, 4)) == 0
    records = metrics(run_dir)
    assert sorted(records) == [1, 2, 3, 4]
    assert not [key for record in records.values() for key in record if "nsp" in key]
    evaluation = metrics(run_dir, "eval")[4]
    # Held-out shards without masks: evaluated with the run's draws, every sequence's count
    # by the rule at --mask-rate.
    assert evaluation["predictions"] == heldout_predictions(roberta_shards, RATE)
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.MODEL_CONFIG]["objective"] == "mlm"


# slow: torchrun and two trainers; the recipe in one process runs by default, and two
# processes training in step in tests/test_train.py.
@pytest.mark.slow
def test_roberta_recipe_under_torchrun(roberta_shards, tmp_path):
    run_dir = tmp_path / "ddp"
    env = torchrun_env()
    command = [
        *torchrun_trainer(2),
        *train_args(roberta_shards, run_dir, 3, "--eval-every", "0", "--whole-word-mask"),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = torch.load(latest_checkpoint(run_dir / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.WORLD_SIZE] == 2
    assert checkpoint[CheckpointKey.MODEL_CONFIG]["objective"] == "mlm"
    assert sorted(metrics(run_dir)) == [1, 2, 3]
    evaluation = metrics(run_dir, "eval")[3]
    # Both ranks' parts of the whole held-out split; whole words end a piece or two short of
    # the rule's count at most, never over it.
    expected = heldout_predictions(roberta_shards, RATE)
    assert 0.97 * expected <= evaluation["predictions"] <= expected


def test_nsp_on_full_sentence_shards_is_refused_before_any_work(roberta_shards, tmp_path, capsys):
    run_dir = tmp_path / "refused"
    args = train_args(roberta_shards, run_dir, 2, "--objective", "mlm+nsp")
    assert train.run(args) == 2
    assert "--objective mlm+nsp" in capsys.readouterr().err
    assert not run_dir.exists()


def test_static_masking_on_unmasked_shards_is_refused(roberta_shards, tmp_path, capsys):
    run_dir = tmp_path / "refused"
    args = [*TINY, *COMMON, "--shards", str(roberta_shards), "--output", str(run_dir)]
    assert train.run([*args, "--max-steps", "2", "--masking", "static"]) == 2
    assert "holds no masks; train it with --masking dynamic (or auto)" in capsys.readouterr().err
    assert not run_dir.exists()


def test_dynamic_masking_resumes_exactly_and_refuses_other_masks(sample_shards, tmp_path, capsys):
    """Sentence-pair shards with fresh masks and NSP: a run stopped at step 2 and resumed
    draws the uninterrupted run's masks (the same losses, bit for bit); a resume that would
    draw others is refused in one line."""
    dynamic = ["--masking", "dynamic", "--whole-word-mask", "--eval-every", "0"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train.run(train_args(sample_shards, whole, 4, *dynamic)) == 0
    assert train.run([*train_args(sample_shards, parts, 4, *dynamic), "--stop-at-step", "2"]) == 0
    assert train.run([*train_args(sample_shards, parts, 4, *dynamic), "--resume"]) == 0
    uninterrupted, resumed = metrics(whole), metrics(parts)
    assert [resumed[s]["loss"] for s in (3, 4)] == [uninterrupted[s]["loss"] for s in (3, 4)]
    assert "nsp_loss" in resumed[4]  # pairs: auto keeps NSP
    capsys.readouterr()
    static = train_args(sample_shards, parts, 6, "--eval-every", "0", "--resume")
    static.remove("--mask-rate")
    static.remove(str(RATE))
    assert train.run(static) == 2
    assert "dynamic masking, now static: pass --masking dynamic" in capsys.readouterr().err
    other_rate = [*train_args(sample_shards, parts, 6, *dynamic, "--resume"), "--mask-rate", "0.2"]
    assert train.run(other_rate) == 2
    assert f"--mask-rate {RATE}, now 0.2" in capsys.readouterr().err
