"""--precision fp16: autocast to float16 with dynamic loss scaling (trainer/precision.py), on
the CPU (torch's CPU autocast takes float16 and torch.amp.GradScaler("cpu") scales): it
trains, an overflow skips the step and halves the scale, the scale goes into the checkpoint
and --resume goes on exactly, and what a GPU without bf16 is told. fp16 matmuls are slow on
a CPU, so the runs here are micro-batches of 2 for a few steps."""

from __future__ import annotations

import itertools
import logging
import subprocess
import warnings

import pytest
import torch

from schemas.checkpoint import CheckpointKey
from tests.support.fp16_trainer import OVERFLOWING_SCALE
from tests.support.torchrun import torchrun_env, torchrun_trainer
from tests.test_precision import COMMON, literal_tiny
from tests.test_step_syncs import HOST_READS, OpCounter
from tests.test_train import metrics
from trainer import distributed, precision, train
from trainer.model import BertForPreTraining
from trainer.optim import build_optimizer, warmup_decay_schedule
from trainer.precision import LossScaler, autocast_for, resolve_precision
from trainer.run.checkpoints import latest_checkpoint, load_checkpoint

# Micro-batches of 2, two per step: gradient accumulation runs with the scaler too.
SMALL = [
    "--micro-batch-size",
    "2",
    "--global-batch-size",
    "4",
    "--max-steps",
    "5",
    "--num-workers",
    "0",
    "--eval-batches",
    "1",
    "--checkpoint-every",
    "100",
]


def literal_model_and_batch() -> tuple[BertForPreTraining, tuple[torch.Tensor, ...]]:
    ids = torch.tensor([[2, 7, 9, 11, 3, 13, 17, 19, 3, 0], [2, 23, 29, 3, 31, 37, 41, 43, 47, 3]])
    batch = (
        ids,
        torch.tensor([[0] * 5 + [1] * 4 + [0], [0] * 4 + [1] * 6]),
        (ids != 0),
        torch.tensor([[1, 5], [2, 6]]),
        torch.tensor([[7, 13], [29, 37]]),
        torch.tensor([0, 1]),
    )
    return literal_tiny(), batch


def literal_losses(number_format: str, steps: int) -> tuple[list[float], LossScaler]:
    """The losses of `steps` steps on the literal batch, the trainer's step as
    trainer/train.py takes it: scaled backward, unscale, clip, the scaler's step."""
    model, batch = literal_model_and_batch()
    optimizer = build_optimizer(model, "adamw", 1e-3, fused=True)
    # A constant rate: the fp16 run, a step behind after its skip, compares with fp32's.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = LossScaler(torch.device("cpu"))
    losses = []
    for _ in range(steps):
        with autocast_for(number_format, torch.device("cpu")):
            out = model(*batch)
        scaler.backward(out.loss)
        scaler.unscale(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer, schedule)
        optimizer.zero_grad(set_to_none=True)
        losses.append(out.loss.item())
    assert out.mlm_logits.dtype == (torch.float16 if number_format == "fp16" else torch.float32)
    return losses, scaler


def test_fp16_with_loss_scaling_trains_a_literal_batch() -> None:
    fp16, scaler = literal_losses("fp16", 6)
    # At torch's starting scale, 2^16, this batch's fp16 gradients overflow: step 1 is
    # skipped (the weights stay, so step 2's loss is step 1's) and the scale halved; from
    # step 2 on the model learns as in fp32, a step behind.
    assert scaler.row(6) == ({"loss_scale": 32768.0, "skipped_steps": 1}, [1])
    assert fp16[1] == fp16[0]
    assert all(later < earlier for earlier, later in itertools.pairwise(fp16[1:]))
    fp32, unscaled = literal_losses("fp32", 5)
    assert unscaled.row(5) == ({"loss_scale": 65536.0, "skipped_steps": 0}, [])
    assert fp16[1:] == pytest.approx(fp32, abs=2e-3)
    assert fp16[1:] != fp32  # fp16 matmuls really ran


def linear_model_and_step(optimizer_name: str):
    """A 3 → 2 linear layer, its optimizer and schedule, its loss scaler, and one step of
    the trainer's kind on a fixed input, with one gradient made inf where `overflow`."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = build_optimizer(model, optimizer_name, 0.1, fused=optimizer_name == "adamw")
    schedule = warmup_decay_schedule(optimizer, 0, 10, 1.0, step=0, peak_lr=0.1)
    scaler = LossScaler(torch.device("cpu"))

    def step(overflow: bool) -> None:
        scaler.backward(model(torch.ones(1, 3)).float().sum() * 1e-6)
        if overflow:
            model.weight.grad[0, 1] = float("inf")
        scaler.unscale(optimizer)
        scaler.step(optimizer, schedule)
        optimizer.zero_grad(set_to_none=True)

    return model, optimizer, schedule, scaler, step


def test_an_overflow_skips_the_step_halves_the_scale_and_is_counted() -> None:
    model, optimizer, schedule, scaler, step = linear_model_and_step("adamw")
    step(overflow=False)  # step 1: a clean step
    weights = [p.detach().clone() for p in model.parameters()]
    moments = [optimizer.state[p]["exp_avg"].clone() for p in model.parameters()]
    step(overflow=True)  # step 2: one gradient overflows
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters(), strict=True))
    for moment, p in zip(moments, model.parameters(), strict=True):
        assert torch.equal(optimizer.state[p]["exp_avg"], moment)
        assert optimizer.state[p]["step"].item() == 1  # the skipped step not counted
    assert schedule.last_epoch == 2  # the schedule stepped past it
    assert scaler.row(2) == ({"loss_scale": 32768.0, "skipped_steps": 1}, [2])
    assert scaler.row(2) == ({"loss_scale": 32768.0, "skipped_steps": 0}, [])  # read once
    assert scaler.state_dict() == {
        "scale": 32768.0,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 2000,
        "_growth_tracker": 0,
    }


def test_lamb_skips_an_overflowing_first_step_without_a_warning() -> None:
    """LAMB has no kernel that takes the overflow flag: GradScaler does not call its step,
    and the schedule's step after it is by design, not the misuse torch warns of."""
    model, optimizer, schedule, scaler, step = linear_model_and_step("lamb")
    weights = [p.detach().clone() for p in model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step(overflow=True)
        step(overflow=False)
    assert schedule.last_epoch == 2
    assert scaler.row(2) == ({"loss_scale": 32768.0, "skipped_steps": 1}, [1])
    state = optimizer.state[model.weight]
    assert state["step"].item() == 1  # step 2 only
    assert not torch.equal(model.weight, weights[0])


def test_skipped_steps_are_logged_and_an_fp16_run_resumes_exactly(
    sample_shards, tmp_path, monkeypatch, caplog, capsys
) -> None:
    # From 2^20 the tiny model's first three steps overflow in fp16 on the sample shards
    # (at 2^20, 2^19, 2^18), and the fourth, at 2^17, does not.
    monkeypatch.setattr(precision, "INITIAL_SCALE", OVERFLOWING_SCALE)
    flags = [*COMMON, *SMALL, "--shards", str(sample_shards), "--precision", "fp16"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    with caplog.at_level(logging.WARNING, logger="bertkit.train"):
        assert train.run([*flags, "--output", str(whole)]) == 0
    expected = metrics(whole)
    assert [expected[s]["skipped_steps"] for s in range(1, 6)] == [1, 1, 1, 0, 0]
    assert [expected[s]["loss_scale"] for s in range(1, 6)] == [2.0**19, 2.0**18] + [2.0**17] * 3
    # A skipped step is a step: the schedule (warmup 1, linear decay over 5) steps past it.
    lrs = [expected[s]["lr"] for s in range(1, 6)]  # what each step trained at
    assert lrs == pytest.approx([0.0, 2e-3, 1.5e-3, 1e-3, 0.5e-3])
    # Each skip named once, at its row.
    skips = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skips == [
        f"step {s} skipped: fp16 gradients overflowed (inf or NaN), loss scale now {scale}"
        for s, scale in ((1, 524288), (2, 262144), (3, 131072))
    ]
    assert all(torch.isfinite(torch.tensor([expected[s]["loss"] for s in range(1, 6)])))
    # Stopped mid-overflow, at 2^18 with step 3 to skip still: the resume skips it too.
    assert train.run([*flags, "--output", str(parts), "--stop-at-step", "2"]) == 0
    saved = load_checkpoint(latest_checkpoint(parts / "checkpoints"))  # weights_only=True
    assert saved[CheckpointKey.GRAD_SCALER]["scale"] == 2.0**18
    assert train.run([*flags, "--output", str(parts), "--resume"]) == 0
    resumed = metrics(parts)
    for field in ("loss", "loss_scale", "skipped_steps", "lr"):
        assert [resumed[s][field] for s in range(1, 6)] == [expected[s][field] for s in range(1, 6)]
    a = load_checkpoint(latest_checkpoint(whole / "checkpoints"))
    b = load_checkpoint(latest_checkpoint(parts / "checkpoints"))
    assert a[CheckpointKey.GRAD_SCALER] == b[CheckpointKey.GRAD_SCALER]
    assert a[CheckpointKey.GRAD_SCALER]["_growth_tracker"] == 2  # steps 4 and 5 clean
    for name, tensor in a[CheckpointKey.MODEL].items():
        assert torch.equal(tensor, b[CheckpointKey.MODEL][name]), name
    # An fp16 run goes on in fp16 only: its scale would be dropped, its losses not these.
    capsys.readouterr()
    for given, shown in (("fp32", "fp32"), ("auto", "auto, so fp32 here")):
        more = ["--max-steps", "6", "--precision", given]
        assert train.run([*flags, "--output", str(parts), "--resume", *more]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"bertkit train: error: --resume: {parts}/checkpoints/step-00000005.pt is an fp16 "
            f"run (its loss scale is in the checkpoint), --precision is {shown}: pass "
            "--precision fp16"
        )


def test_a_bf16_or_fp32_run_goes_on_in_fp16_with_a_fresh_scale(
    sample_shards, tmp_path, caplog
) -> None:
    flags = [*COMMON, *SMALL, "--shards", str(sample_shards), "--output", str(tmp_path / "r")]
    assert train.run([*flags, "--precision", "fp32", "--stop-at-step", "1"]) == 0
    saved = load_checkpoint(latest_checkpoint(tmp_path / "r" / "checkpoints"))
    assert CheckpointKey.GRAD_SCALER not in saved  # fp32 and bf16 checkpoints: no new key
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        more = ["--precision", "fp16", "--max-steps", "2", "--resume"]
        assert train.run([*flags, *more]) == 0
    assert (
        f"--resume: {tmp_path}/r/checkpoints/step-00000001.pt was not trained in fp16; its "
        "fp16 loss scale starts at 65536" in caplog.messages
    )
    assert metrics(tmp_path / "r")[2]["loss_scale"] == 65536.0
    assert "loss_scale" not in metrics(tmp_path / "r")[1]  # the fp32 row has no such field


def test_an_fp16_step_with_fused_adamw_reads_no_value_back(sample_shards, tmp_path) -> None:
    """The overflow check and the skip stay on the device (tests/test_step_syncs.py)."""
    flags = [*SMALL, "--global-batch-size", "2", "--model", "tiny", "--no-tensorboard"]
    flags = [*flags, "--precision", "fp16"]  # one micro-batch a step: the step alone
    config = train.parse_arguments(
        [*flags, "--shards", str(sample_shards), "--output", str(tmp_path / "r"), "--device", "cpu"]
    )
    env = distributed.setup(config.device)
    run = train.setup(config, env)
    assert run.scaler is not None and run.optimizer.defaults["fused"] is True
    sums = torch.zeros(8, dtype=torch.float64)
    run.model.train()
    train.train_step(run, sums)  # the optimizer makes its state
    with OpCounter() as ops:
        train.train_step(run, sums)
    run.progress.close()
    run.logger.close()
    run.loader.close()
    run.directory.close()
    reads = {name: count for name, count in ops.calls.items() if name in HOST_READS}
    assert reads == {}, reads
    assert ops.calls["aten._amp_foreach_non_finite_check_and_unscale_"] == 1
    assert ops.calls["aten._amp_update_scale_"] == 1
    assert ops.calls["aten._fused_adamw_"] == 2  # two parameter groups


def test_auto_takes_fp16_on_a_gpu_without_bf16_where_bf16_is_refused(monkeypatch, caplog) -> None:
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert resolve_precision("auto", cuda) == "fp16"
    assert caplog.messages == [
        "--precision auto: fp16 with dynamic loss scaling (Tesla V100-SXM2-16GB has no bf16; "
        "pass --precision fp32 to train without either)"
    ]
    with pytest.raises(ValueError) as refused:
        resolve_precision("bf16", cuda)
    assert str(refused.value) == (
        "--precision bf16: Tesla V100-SXM2-16GB has no bf16 (it needs compute capability 8.0, "
        "Ampere or newer): pass --precision fp16 (or auto)"
    )
    assert resolve_precision("fp16", cuda) == resolve_precision("fp16", torch.device("cpu"))
    # An Ampere or newer GPU: bf16, as before; the CPU: fp32, as before.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert resolve_precision("auto", cuda) == "bf16"
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"


@pytest.mark.slow
def test_two_gloo_processes_skip_the_same_steps_as_one(sample_shards, tmp_path, monkeypatch):
    """DDP: each process's micro-batches but the last under no_sync, the scaled gradients
    averaged on the last; an overflow on either process is an inf in both after the
    average, so both skip the step and halve the scale. The one-process run of the same
    global batches divides each micro-batch's loss by 4 where each of two processes
    divides by 2: from twice the scale, its fp16 backward passes compute the same values."""
    flags = [*COMMON, *SMALL, "--shards", str(sample_shards), "--precision", "fp16"]
    flags = [*flags, "--global-batch-size", "8"]  # 2 processes × 2 micro-batches of 2
    command = [*torchrun_trainer(2)[:-2], "-m", "tests.support.fp16_trainer"]
    done = subprocess.run(
        [*command, *flags, "--output", str(tmp_path / "two")],
        env=torchrun_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    monkeypatch.setattr(precision, "INITIAL_SCALE", 2 * OVERFLOWING_SCALE)
    assert train.run([*flags, "--output", str(tmp_path / "one")]) == 0
    two, one = metrics(tmp_path / "two"), metrics(tmp_path / "one")
    assert [two[s]["skipped_steps"] for s in range(1, 6)] == [1, 1, 1, 0, 0]
    assert [one[s]["skipped_steps"] for s in range(1, 6)] == [1, 1, 1, 0, 0]
    assert [2 * two[s]["loss_scale"] for s in range(1, 6)] == [
        one[s]["loss_scale"] for s in range(1, 6)
    ]
    assert [two[s]["lr"] for s in range(1, 6)] == [one[s]["lr"] for s in range(1, 6)]
    # The skipped steps left the initial weights: their losses equal; after, the gradients
    # summed in another order: close.
    losses = [one[s]["loss"] for s in range(1, 6)]
    assert [two[s]["loss"] for s in range(1, 4)] == losses[:3]
    assert [two[s]["loss"] for s in range(4, 6)] == pytest.approx(losses[3:], abs=1e-4)
