"""The GPU run's numerical paths, exercised on the CPU: bf16 autocast, AdamW's fused kernel
(the trainer's choice on CUDA and CPU alike), and the generator states a checkpoint keeps.
What only a GPU can run (NCCL, CUDA generators, inductor's Triton kernels) is in
bench/train_step.py and the GPU smoke command of the README."""

from __future__ import annotations

import json

import pytest
import torch

from schemas.checkpoint import CheckpointKey, KernelsKey
from trainer import distributed, train
from trainer.model import BertForPreTraining, config_for
from trainer.optim import build_optimizer
from trainer.precision import precision_change, recorded_precision

COMMON = [
    "--model",
    "tiny",
    "--micro-batch-size",
    "16",
    "--lr",
    "2e-3",
    "--log-every",
    "1",
    "--no-tensorboard",
    "--max-steps",
    "4",
    "--warmup-steps",
    "1",
    "--eval-every",
    "0",
    "--eval-batches",  # the end's evaluation: the first 32 held-out sequences
    "2",
    "--dropout",
    "0",
]


def train_losses(run_dir) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r["kind"] == "train"]


def literal_tiny() -> BertForPreTraining:
    """A tiny model over a 50-token vocabulary, no dropout, its weights drawn at seed 0."""
    torch.manual_seed(0)
    config = config_for(
        "tiny",
        50,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForPreTraining(config)


def test_fused_adamw_takes_the_steps_of_the_for_loop_adamw() -> None:
    models = [literal_tiny()]
    models.append(BertForPreTraining(models[0].config))
    models[1].load_state_dict(models[0].state_dict())
    optimizers = [
        build_optimizer(m, "adamw", 1e-3, fused=f)
        for m, f in zip(models, (True, False), strict=True)
    ]
    assert optimizers[0].defaults["fused"] is True and not optimizers[1].defaults["fused"]
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        ids = torch.randint(5, 50, (2, 12), generator=generator)
        batch = (
            ids,
            torch.zeros_like(ids),
            torch.ones_like(ids, dtype=torch.bool),
            torch.tensor([[1, 2], [3, 4]]),
            torch.tensor([[7, 8], [9, -100]]),
        )
        for model, optimizer in zip(models, optimizers, strict=True):
            model(*batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    for fused, loop in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(fused, loop, atol=1e-6, rtol=1e-5)


def test_bf16_autocast_trains_on_the_cpu_close_to_fp32(sample_shards, tmp_path) -> None:
    shards = ["--shards", str(sample_shards)]
    assert (
        train.run([*COMMON, *shards, "--output", str(tmp_path / "bf16"), "--precision", "bf16"])
        == 0
    )
    assert (
        train.run([*COMMON, *shards, "--output", str(tmp_path / "fp32"), "--precision", "fp32"])
        == 0
    )
    bf16, fp32 = train_losses(tmp_path / "bf16"), train_losses(tmp_path / "fp32")
    assert len(bf16) == 4 and bf16 != fp32  # bf16 matmuls really ran
    assert bf16 == pytest.approx(fp32, abs=0.05)


def test_generator_states_round_trip_and_name_their_device() -> None:
    env = distributed.Distributed(0, 1, 0, torch.device("cpu"))
    state = distributed.rng_state(env)
    assert state["device_type"] == "cpu" and state["device"] is None and state["cuda"] is None
    first = torch.rand(3)
    distributed.restore_rng(env, state)
    torch.testing.assert_close(torch.rand(3), first, atol=0, rtol=0)
    # A checkpoint written before "device_type" (CPU: "cuda" None) restores the same way.
    distributed.restore_rng(env, {"torch": state["torch"], "cuda": None})
    torch.testing.assert_close(torch.rand(3), first, atol=0, rtol=0)


def _checkpoint(flag: str | None, kernels_on: str | None = None, scaled: bool = False) -> dict:
    """The fields of a checkpoint that say which precision its run trained in."""
    return {
        CheckpointKey.TRAIN_CONFIG: {} if flag is None else {"precision": flag},
        **({CheckpointKey.KERNELS: {KernelsKey.DEVICE: kernels_on}} if kernels_on else {}),
        **({CheckpointKey.GRAD_SCALER: {"scale": 65536.0}} if scaled else {}),
    }


@pytest.mark.parametrize(
    ("checkpoint", "recorded"),
    [
        (_checkpoint("fp32"), "fp32"),
        (_checkpoint("bf16", "NVIDIA H100 80GB HBM3"), "bf16"),
        (_checkpoint("auto", "cpu"), "fp32"),
        (_checkpoint("auto", "NVIDIA A100-SXM4-80GB"), "bf16"),
        (_checkpoint("auto", "Tesla V100-SXM2-16GB", scaled=True), "fp16"),
        (_checkpoint("fp16", scaled=True), "fp16"),
        (_checkpoint("auto"), None),  # before the kernels record: auto took what it took
        (_checkpoint(None), None),
    ],
)
def test_a_checkpoint_says_which_precision_its_run_trained_in(checkpoint, recorded) -> None:
    assert recorded_precision(checkpoint) == recorded


def test_a_resume_in_another_precision_is_one_phrase_of_its_line() -> None:
    cpu_auto = _checkpoint("auto", "cpu")
    assert precision_change(cpu_auto, "bf16", "bf16") == "--precision fp32 → bf16"
    assert precision_change(cpu_auto, "fp32", "auto") is None
    assert precision_change(cpu_auto, "fp32", "fp32") is None
    gpu_auto = _checkpoint("auto", "NVIDIA H100 80GB HBM3")
    assert precision_change(gpu_auto, "fp32", "auto") == "--precision bf16 → fp32"  # on a CPU
    unrecorded = _checkpoint("auto")
    assert precision_change(unrecorded, "fp32", "auto") is None
    assert precision_change(unrecorded, "bf16", "bf16") == "--precision auto → bf16"
    assert precision_change(_checkpoint("fp32"), "fp16", "fp16") == "--precision fp32 → fp16"
