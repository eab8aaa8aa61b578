"""Dropout, the residual add and LayerNorm in one kernel each way (`--add-norm`, issue 39
item 2): the Triton kernels, run by Triton's interpreter on the CPU, give the plain ops'
values and gradients; with dropout, backward draws forward's mask again; the model and the
trainer take them where chosen, and a resumed run goes on with the same masks."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from schemas.checkpoint import CheckpointKey, KernelsKey
from tests.test_fp8 import checkpoint_summary
from tests.test_model_levers import TINY_RUN, assert_equal_within, model, step
from tests.test_train import metrics
from trainer import add_norm as add_norm_module
from trainer import train
from trainer.add_norm import ADD_NORM, add_norm, choose_add_norm, plain_add_norm

pytest.importorskip("triton", reason="the kernels' tests run in Triton's interpreter")


@pytest.fixture(autouse=True)
def interpreted():
    """Triton's interpreter, which tests/conftest.py chose before Triton's import."""
    from triton.runtime.interpreter import InterpretedFunction

    from trainer import triton_kernels

    assert isinstance(triton_kernels.add_norm_forward, InterpretedFunction)


def layer_norm(width: int) -> nn.LayerNorm:
    torch.manual_seed(4)
    norm = nn.LayerNorm(width)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    return norm


def test_one_row_adds_and_normalizes():
    """x + y = [2, 3, 4, 5]: mean 3.5, variance 1.25, so (h - 3.5) / sqrt(1.25 + 1e-5)."""
    norm = nn.LayerNorm(4)
    out = add_norm(torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.ones(1, 4), norm, 0.0)
    want = [-1.3416355, -0.4472118, 0.4472118, 1.3416355]
    torch.testing.assert_close(out, torch.tensor([want]), rtol=0, atol=1e-6)


def run(block, residual, branch, norm, rate):
    """The block's output and the gradients of the residual, the branch and the norm's two
    parameters, for an upstream gradient that weighs each column differently."""
    for tensor in (residual, branch, norm.weight, norm.bias):
        tensor.grad = None
    out = block(residual, branch, norm, rate)
    width = out.shape[-1]
    (out.double() * torch.linspace(-1, 1, width, dtype=torch.float64)).sum().backward()
    grads = (residual.grad, branch.grad, norm.weight.grad, norm.bias.grad)
    return [out.detach(), *(grad.clone() for grad in grads)]


@pytest.mark.parametrize("branch_dtype", [torch.float32, torch.bfloat16])
def test_without_dropout_the_kernels_give_the_plain_ops_values_and_gradients(branch_dtype):
    """(2, 19, 40) rows, the residual fp32 and the branch fp32 or bf16 (as under autocast):
    the output and every gradient, each in the plain ops' dtype, within a rounding of it."""
    norm = layer_norm(40)
    residual = torch.randn(2, 19, 40, requires_grad=True)
    branch = torch.randn(2, 19, 40).to(branch_dtype).requires_grad_()
    plain = run(plain_add_norm, residual, branch, norm, 0.0)
    fused = run(add_norm, residual, branch, norm, 0.0)
    for got, want in zip(fused, plain, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        unit = torch.finfo(want.dtype).eps
        scale = want.abs().max().item()
        assert (got.double() - want.double()).abs().max().item() <= 4 * unit * scale


def test_backward_draws_forward_s_dropout_mask_again():
    """p = 0.25: the kept elements, read off the op's sum (h - x), are about 3/4 of them;
    the output and every gradient are the plain formula's with that mask, so backward drew
    the forward's mask from the seed again."""
    norm = layer_norm(40)
    residual = torch.randn(64, 40, requires_grad=True)
    branch = torch.randn(64, 40, requires_grad=True)
    torch.manual_seed(11)
    fused = run(add_norm, residual, branch, norm, 0.25)
    torch.manual_seed(11)  # the same seed, drawn as add_norm draws it
    seed = torch.randint(add_norm_module._SEEDS, (), dtype=torch.int64)
    total = torch.ops.bertkit.add_norm(residual, branch, norm.weight, norm.bias, 0.25, seed, 1e-5)[
        1
    ]
    kept = (total - residual).detach() != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.03  # 2,560 draws: 3 standard errors

    def masked(residual, branch, norm, rate):
        return norm(residual + torch.where(kept, branch / (1 - rate), 0.0))

    plain = run(masked, residual, branch, norm, 0.25)
    for got, want in zip(fused, plain, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert torch.equal(fused[2] == 0, ~kept)  # a dropped element gets no gradient


def test_a_seed_gives_the_same_bytes_and_each_call_another_mask():
    norm = layer_norm(40)
    residual, branch = torch.randn(16, 40), torch.randn(16, 40)
    torch.manual_seed(3)
    first, second = (add_norm(residual, branch, norm, 0.1) for _ in range(2))
    torch.manual_seed(3)
    again = add_norm(residual, branch, norm, 0.1)
    assert torch.equal(first, again) and not torch.equal(first, second)


def test_the_kernels_compile_as_one_graph_with_the_same_results():
    norm = layer_norm(40)
    residual = torch.randn(38, 40, requires_grad=True)
    branch = torch.randn(38, 40).bfloat16().requires_grad_()
    torch.manual_seed(5)
    eager = run(add_norm, residual, branch, norm, 0.1)
    torch._dynamo.reset()
    compiled = torch.compile(add_norm, backend="aot_eager", fullgraph=True)
    torch.manual_seed(5)
    again = run(compiled, residual, branch, norm, 0.1)
    for got, want in zip(again, eager, strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("unpad", ["off", "on"])
def test_the_model_takes_the_kernels_with_the_same_results(unpad):
    """The tiny model (no dropout) with and without the kernels, padded and on its real
    tokens: the same losses, logits and gradients; both kernels at once too."""
    plain, fused, both = model(unpad), model(unpad), model(unpad)
    fused.use_kernels(add_norm=True)
    both.use_kernels(ffn_epilogue=True, add_norm=True)
    assert [(layer.add_norm, layer.ffn_epilogue) for layer in both.layers] == [(True, True)] * 2
    expected = step(plain)
    assert_equal_within(expected, step(fused), atol=2e-6)
    assert_equal_within(expected, step(both), atol=2e-6)


def test_a_run_with_the_kernels_resumes_with_the_same_masks_and_kernels(
    sample_shards, tmp_path, monkeypatch, caplog
):
    """`bertkit train --add-norm auto`, the kernels let run on the CPU and timed faster, at
    the 2018 recipe's hidden dropout 0.1, stopped at step 1 and resumed: the resume takes
    the kernels again untimed (the checkpoint's record) and gives the losses of the run that
    was not stopped (the generator's state, which draws the masks' seeds, is in the
    checkpoint). tests/test_ffn_epilogue.py compares a run with both kernels and without
    dropout with the plain one."""
    monkeypatch.setattr(add_norm_module, "gpu_obstacles", lambda device: [])
    timed = []
    monkeypatch.setattr(
        add_norm_module, "time_add_norm", lambda *args: timed.append(args[:3]) or (2.0, 1.0, None)
    )
    rates = []
    real = add_norm_module.kernels

    def spied():
        kernels = real()
        forward = kernels.launch_add_norm_forward
        return SimpleNamespace(
            launch_add_norm_forward=lambda *args: rates.append(args[5]) or forward(*args),
            launch_add_norm_backward=kernels.launch_add_norm_backward,
        )

    monkeypatch.setattr(add_norm_module, "kernels", spied)
    losses = {}
    for name, extra in (("straight", []), ("resumed", ["--stop-at-step", "1"])):
        out = tmp_path / name
        # Micro-batches of 2 (TINY_RUN's 8 cost the interpreter 4× the CPU to prove the same).
        flags = [*TINY_RUN, "--shards", str(sample_shards), "--output", str(out), "--add-norm",
                 "auto", "--max-steps", "2", "--micro-batch-size", "2"]  # fmt: skip
        assert train.run([*flags, *extra]) == 0
        # Timed once, on a micro-batch's rows (2 × 128) of the hidden size at its dropout.
        assert timed.pop() == (2 * 128, 128, 0.1) and timed == []
        if extra:
            rates.clear()
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="bertkit.train"):
                assert train.run([*flags, "--resume"]) == 0
            assert timed == []  # taken again from the checkpoint, untimed
            assert (
                "--add-norm auto: each layer's dropout, residual add and LayerNorm run in one "
                "kernel each way (Triton), as at the run's start (its checkpoint's record)"
            ) in [record.getMessage() for record in caplog.records]
            assert rates == [0.1] * 4 + [0.0] * 4  # step 2's layers, then evaluation
        else:  # 2 a layer, 2 layers: training's 2 steps drop at 0.1, evaluation's batch not
            assert rates == [0.1] * 8 + [0.0] * 4
        saved = torch.load(out / "checkpoints" / "step-00000002.pt", weights_only=True)
        assert saved[CheckpointKey.KERNELS] == {
            KernelsKey.DEVICE: "cpu",
            KernelsKey.FFN_EPILOGUE: False,
            KernelsKey.ADD_NORM: True,
        }
        losses[name] = [metrics(out)[step]["loss"] for step in (1, 2)]
    assert losses["resumed"] == losses["straight"]
    # `bertkit inspect` names the kernels the run took.
    assert "  seed 12345, precision auto, --add-norm kernels taken (on cpu), device auto" in (
        checkpoint_summary(out)
    )


def test_auto_times_at_the_run_s_shape_and_dropout(monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(add_norm_module, "gpu_obstacles", lambda device: [])
    timed = []
    monkeypatch.setattr(
        add_norm_module, "time_add_norm", lambda *args: timed.append(args) or (3.0, 2.0, None)
    )
    use, line = choose_add_norm("auto", cuda, torch.bfloat16, (32768, 768), 0.1, True)
    assert timed == [(32768, 768, 0.1, torch.bfloat16, cuda, True)]
    assert (use, line) == (
        True,
        "--add-norm auto: each layer's dropout, residual add and LayerNorm run in one kernel "
        "each way (Triton): 1.50× as fast as the plain dropout, add and LayerNorm, timed "
        "forward and backward on 32,768 rows of 768, dropout 0.1",
    )
    assert ADD_NORM.auto_choice(2.0, 2.5, "8 rows of 4, dropout 0")[0] is False
