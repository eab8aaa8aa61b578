"""Held-out metrics are a function of the model and the held-out data only: 1 and 2
processes (torchrun, Gloo on the CPU) evaluate the same sequences of the same weights and
report the same totals."""

from __future__ import annotations

import subprocess

import pytest
import torch

from schemas.batch import BatchField
from schemas.checkpoint import CheckpointKey
from tests.support.torchrun import torchrun_env, torchrun_trainer
from tests.test_train import metrics
from trainer import train
from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source
from trainer.run.checkpoints import latest_checkpoint

KEY = BatchField.SAMPLE_INDEX

# One step with --warmup-steps 1 trains at lr 0.0 (the schedule's factor at step 0): the
# weights stay the initial ones, which rank 0 draws and DDP hands to rank 1, so both runs
# evaluate one model. --eval-batches 3 of 16: the held-out split's first 48 sequences.
FLAGS = [
    "--model",
    "tiny",
    "--micro-batch-size",
    "16",
    "--global-batch-size",  # one process accumulates two micro-batches: the same 32
    "32",
    "--peak-tflops",
    "1",
    "--max-steps",
    "1",
    "--warmup-steps",
    "1",
    "--eval-batches",
    "3",
    "--num-workers",
    "0",
    "--no-tensorboard",
]


def test_one_and_two_processes_report_the_same_held_out_metrics(sample_shards, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert train.run([*FLAGS, "--shards", str(sample_shards), "--output", str(one)]) == 0
    command = [
        *torchrun_trainer(2),
        *FLAGS,
        "--shards",
        str(sample_shards),
        "--output",
        str(two),
        "--resume",  # nothing to resume yet: said once, not once a process
    ]
    done = subprocess.run(command, env=torchrun_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("has no checkpoint yet (the run stopped before its first)") == 1
    a = torch.load(latest_checkpoint(one / "checkpoints"), weights_only=True)
    b = torch.load(latest_checkpoint(two / "checkpoints"), weights_only=True)
    assert b[CheckpointKey.WORLD_SIZE] == 2
    for name, tensor in a[CheckpointKey.MODEL].items():
        assert torch.equal(tensor, b[CheckpointKey.MODEL][name]), name
    got, want = metrics(two, "eval")[1], metrics(one, "eval")[1]
    # The same 48 sequences (before: 3 batches on each rank, 96 on two processes) ...
    assert want["sequences"] == got["sequences"] == 48
    assert got["predictions"] == want["predictions"] > 0
    # ... and the same totals: sums over the ranks, not averages of their averages.
    for name in ("mlm_loss", "mlm_accuracy", "nsp_accuracy"):
        assert got[name] == pytest.approx(want[name], rel=1e-6, abs=1e-9), name
    # The throughput is the job's: the same 32 sequences give the same tokens and FLOPs per
    # sequence (the FLOPs were the job's and the sequences rank 0's: twice as many a
    # sequence), and the MFU is over both devices' peak (--peak-tflops 1 each).
    solo, pair = metrics(one, "train")[1], metrics(two, "train")[1]
    for name in ("tokens_per_s", "model_tflops"):
        per_sequence = solo[name] / solo["seq_per_s"]
        assert pair[name] / pair["seq_per_s"] == pytest.approx(per_sequence, rel=1e-9), name
    assert solo["mfu"] == pytest.approx(solo["model_tflops"], rel=1e-12)
    assert pair["mfu"] == pytest.approx(pair["model_tflops"] / 2, rel=1e-12)


def test_a_partial_evaluation_reads_the_same_first_sequences_on_any_world(sample_shards):
    """The loader's part of the evaluation: the first 40 held-out samples of the stored
    order, split among 1, 2 and 3 ranks (batches of 8), are the same 40 samples."""
    heldout = open_source(str(sample_shards), "heldout")
    keys = {}
    for world in (1, 2, 3):
        read = []
        for rank in range(world):
            config = LoaderConfig(
                8, rank=rank, world_size=world, shuffle=False, drop_last=False, limit=40
            )
            with PretrainingLoader(heldout, config) as loader:
                read += [int(k) for b in loader.epoch(DataPosition()) for k in b[KEY]]
        keys[world] = read
    assert keys[1] == keys[2] == keys[3] and len(keys[1]) == 40
    whole = LoaderConfig(8, shuffle=False, drop_last=False)
    with PretrainingLoader(heldout, whole) as loader:
        first = [int(k) for b in loader.epoch(DataPosition()) for k in b[KEY]][:40]
    assert keys[1] == first


def test_a_rank_with_no_held_out_sequence_reads_nothing(sample_shards):
    """3 sequences on 4 ranks: rank 3 has none, and reads none without an error (its
    totals are zeros); ranks 0-2 one each."""
    heldout = open_source(str(sample_shards), "heldout")
    counts = []
    for rank in range(4):
        config = LoaderConfig(8, rank=rank, world_size=4, shuffle=False, drop_last=False, limit=3)
        with PretrainingLoader(heldout, config) as loader:
            counts.append(sum(len(b[KEY]) for b in loader.epoch(DataPosition())))
    assert counts == [1, 1, 1, 0]
