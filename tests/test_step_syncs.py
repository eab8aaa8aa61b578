"""A training step never reads a tensor's value back on the host.

On a GPU such a read (`.item()`, `int(t)`, `bool(t)`, a boolean mask's `nonzero`) makes the
CPU wait until the GPU has run every kernel queued before it, so the next step's kernels are
not queued in time and the GPU idles. The trainer's step keeps its sums on the device and
counts tokens on the host copy of the batch (trainer/train.py). This test runs real steps of
`bertkit train`'s Run on the CPU under a TorchDispatchMode and fails on any aten op that, on
a GPU, would wait for it. With `--num-workers 0` the loader runs in the step's process, so
its host-side work is held to the same rule. (Copies to the CPU, `.cpu()` and `.tolist()`,
dispatch nothing on a CPU tensor, so they are not seen here; the step makes none.)
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.support.varlen import reference_flash_forward, reference_varlen_attn
from trainer import attention, distributed, train
from trainer.evaluate import evaluate

# The aten ops that read a value to the host (and so synchronise with a GPU) or whose
# output shape depends on the data (which needs the same read).
HOST_READS = frozenset(
    {
        "aten._local_scalar_dense",  # .item(), int(t), float(t), bool(t)
        "aten.is_nonzero",
        "aten.equal",
        "aten.nonzero",  # (nonzero_static, given its size, waits for nothing)
        "aten.masked_select",
        "aten.unique_consecutive",
        "aten._unique2",
        "aten._assert_async",
    }
)


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.calls[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_a_training_step_reads_no_value_back(sample_shards, tmp_path, optimizer: str) -> None:
    config = train.parse_arguments(
        [
            "--model",
            "tiny",
            "--micro-batch-size",
            "8",
            "--global-batch-size",
            "16",
            "--shards",
            str(sample_shards),
            "--output",
            str(tmp_path / "run"),
            "--max-steps",
            "10",
            "--warmup-steps",
            "2",
            "--optimizer",
            optimizer,
            "--num-workers",
            "0",
            "--no-tensorboard",
            "--device",
            "cpu",
        ]
    )
    assert config.clip_grad_norm > 0  # clipping is part of the step under test
    env = distributed.setup(config.device)
    run = train.setup(config, env)
    sums = torch.zeros(8, dtype=torch.float64)
    run.model.train()
    train.train_step(run, sums)  # the optimizer makes its state
    before = [p.detach().clone() for p in run.model.parameters()]
    with OpCounter() as ops:
        grad_norms = [train.train_step(run, sums) for _ in range(2)]
    run.progress.close()
    run.logger.close()
    reads = {name: count for name, count in ops.calls.items() if name in HOST_READS}
    assert reads == {}, reads
    # The steps did run: 2 steps × 2 micro-batches × 2 losses (MLM, NSP); the optimizer once
    # per step and parameter group (2: decay, no decay) and it moved the weights; the sums
    # hold 3 steps × 2 micro-batches of 8 sequences.
    assert ops.calls["aten.nll_loss_forward"] == ops.calls["aten.nll_loss_backward"] == 8
    update = {"adamw": "aten._fused_adamw_", "lamb": "aten._foreach_lerp_"}[optimizer]
    assert ops.calls[update] == 2 * 2
    assert any(not torch.equal(a, b) for a, b in zip(before, run.model.parameters(), strict=True))
    assert sums[6].item() == 3 * 2 * 8 and sums[7].item() == 3 * 2
    assert all(isinstance(norm, torch.Tensor) and norm.ndim == 0 for norm in grad_norms)


def test_evaluation_reads_its_sums_back_once(sample_shards, tmp_path) -> None:
    """Held-out evaluation keeps its sums on the device: every batch's forward is queued
    without a wait, and the totals are read once, after the last batch."""
    config = train.parse_arguments(
        [
            "--model",
            "tiny",
            "--micro-batch-size",
            "8",
            "--shards",
            str(sample_shards),
            "--output",
            str(tmp_path / "run"),
            "--max-steps",
            "2",
            "--warmup-steps",
            "1",
            "--num-workers",
            "0",
            "--no-tensorboard",
            "--device",
            "cpu",
        ]
    )
    env = distributed.setup(config.device)
    run = train.setup(config, env)
    assert run.heldout is not None
    with OpCounter() as ops:
        result = evaluate(run.model, run.heldout, env, 8, max_sequences=40)
    run.progress.close()
    run.logger.close()
    reads = {name: count for name, count in ops.calls.items() if name in HOST_READS}
    assert reads == {}, reads
    assert ops.calls["aten.nll_loss_forward"] == 5 * 2  # 5 batches, MLM and NSP losses
    assert result.sequences == 5 * 8 and result.predictions > 0


NO_DROPOUT = ["--attention-dropout", "0"]


@pytest.mark.parametrize(
    ("floor", "flags", "unpadded"),
    [
        (1.01, NO_DROPOUT, 0),  # every batch under the floor: padded, from the host's count
        (0.0, NO_DROPOUT, 4 + 5),  # 4 micro-batches of training, 5 batches of evaluation
        (0.0, [], 5),  # the 2018 recipe's attention dropout: padded training
        (1.01, ["--unpad", "on"], 4 + 5),
    ],
)
def test_unpadded_forwards_take_their_counts_from_the_host(
    sample_shards, tmp_path, monkeypatch, floor: float, flags: list[str], unpadded: int
) -> None:
    """--unpad where the varlen kernel runs (the CPU stand-ins of tests/support/varlen.py):
    auto (the default) keeps a batch under the padding floor padded from the host's count,
    and an unpadded forward takes the real tokens' counts from the host, so no forward waits
    on the device, in training (2 steps × 2 micro-batches) or in evaluation (5 batches).
    With the 2018 recipe's attention dropout auto keeps training padded."""

    def no_read(lengths):
        raise AssertionError("an unpadded forward read its counts from the device")

    monkeypatch.setattr(attention, "read_counts", no_read)
    monkeypatch.setattr(attention, "AUTO_MIN_PADDING", floor)
    monkeypatch.setattr(attention, "varlen_attn", reference_varlen_attn)
    monkeypatch.setattr(attention, "_FLASH_FORWARD", reference_flash_forward)
    monkeypatch.setattr("trainer.model.varlen_usable", lambda *args: True)
    config = train.parse_arguments(
        [
            *("--model", "tiny", "--micro-batch-size", "8", "--global-batch-size", "16"),
            *("--shards", str(sample_shards), "--output", str(tmp_path / "run")),
            *("--max-steps", "4", "--warmup-steps", "1", "--num-workers", "0"),
            *("--no-tensorboard", "--device", "cpu"),
            *flags,
        ]
    )
    env = distributed.setup(config.device)
    run = train.setup(config, env)
    run.model.train()
    sums = torch.zeros(8, dtype=torch.float64)
    with OpCounter() as ops:
        for _ in range(2):
            train.train_step(run, sums)
        evaluate(run.model, run.heldout, env, 8, max_sequences=40)
    run.progress.close()
    run.logger.close()
    assert {name: count for name, count in ops.calls.items() if name in HOST_READS} == {}
    assert ops.calls["aten.nonzero_static"] == unpadded  # once an unpadded forward
    assert sums[7].item() == 2 * 2
