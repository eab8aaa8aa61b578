"""The feed-forward block's GELU in the matmul's epilogue (`--ffn-epilogue`, issue 39 item 1):
the Triton kernels, run by Triton's interpreter on the CPU, give the plain block's values
and gradients; the model and the trainer take them where chosen; auto's choice and every
line the run logs."""

from __future__ import annotations

import copy
import logging
import math

import pytest
import torch
from torch import nn

from schemas.checkpoint import KernelsKey
from tests.test_model_levers import TINY_RUN, assert_equal_within, model, step
from tests.test_train import metrics
from trainer import add_norm, ffn_epilogue, kernel_choice, train
from trainer.config import TrainConfig
from trainer.distributed import Distributed
from trainer.ffn_epilogue import (
    FFN_EPILOGUE,
    choose_ffn_epilogue,
    feed_forward,
    ffn_gelu_grad,
    ffn_up,
    plain_feed_forward,
)
from trainer.kernel_choice import disagreement
from trainer.levers import choose_kernels
from trainer.model import BertForPreTraining, config_for

pytest.importorskip("triton", reason="the kernels' tests run in Triton's interpreter")

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def interpreted():
    """Triton's interpreter, which tests/conftest.py chose before Triton's import."""
    from triton.runtime.interpreter import InterpretedFunction

    from trainer import triton_kernels

    assert isinstance(triton_kernels.matmul_gelu, InterpretedFunction)


def gelu(x: float) -> float:
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def gelu_slope(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2))) + x * math.exp(-x * x / 2) / math.sqrt(
        2 * math.pi
    )


def test_the_forward_kernel_adds_the_bias_and_takes_the_gelu():
    hidden = torch.tensor([[1.0, -1.0], [2.0, 0.5]])
    weight = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (3, 2): nn.Linear's layout
    bias = torch.tensor([0.0, 0.0, 0.5])
    pre, activation = ffn_up(hidden, weight, bias)
    assert pre.tolist() == [[1.0, -1.0, 0.5], [2.0, 0.5, 3.0]]
    # GELU(x) = x·Φ(x): 1 → 0.8413447, -1 → -0.1586553, 0.5 → 0.3457312, 2 → 1.9544997, 3 → 2.9959503
    want = [[0.8413447, -0.1586553, 0.3457312], [1.9544997, 0.3457312, 2.9959503]]
    torch.testing.assert_close(activation, torch.tensor(want), rtol=0, atol=1e-7)
    assert want == [[round(gelu(x), 7) for x in row] for row in pre.tolist()]


def test_the_backward_kernel_multiplies_by_the_gelu_s_slope():
    grad = torch.tensor([[1.0, 2.0], [0.5, -1.0]])  # (M=2, K=2), at the block's output
    weight = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # (K=2, N=3): the down Linear's
    pre = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -3.0]])
    got = ffn_gelu_grad(grad, weight, pre)
    upstream = [[1.0, 2.0, 3.0], [0.5, -1.0, -0.5]]  # grad · weight
    pairs = zip(upstream, pre.tolist(), strict=True)
    want = [[g * gelu_slope(x) for g, x in zip(*rows, strict=True)] for rows in pairs]
    torch.testing.assert_close(got, torch.tensor(want), rtol=1e-6, atol=1e-7)
    # GELU'(x) = Φ(x) + x·φ(x): 1 → 1.0833155, 0 → 0.5
    assert [round(gelu_slope(x), 7) for x in (1.0, 0.0)] == [1.0833155, 0.5]
    assert got[0, 0].item() == pytest.approx(1.0833155, abs=1e-7)
    assert got[1, 0].item() == 0.25  # 0.5 · GELU'(0)


def block_run(block, hidden, up, down, dtype):
    """The block's output and the gradients of hidden and the four weights, under `dtype`'s
    autocast (fp32: none)."""
    for tensor in (hidden, *up.parameters(), *down.parameters()):
        tensor.grad = None
    with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
        out = block(hidden, up, down)
    (out.double() * torch.linspace(-1, 1, out.shape[-1], dtype=torch.float64)).sum().backward()
    grads = [hidden.grad, up.weight.grad, up.bias.grad, down.weight.grad, down.bias.grad]
    return [out.detach(), *(grad.clone() for grad in grads)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_kernels_give_the_plain_block_s_values_and_gradients(dtype):
    """(2, 19, 24) rows through 24 → 40 → 24: several tiles of the interpreter's 16 × 32 ×
    16, and a ragged edge in each dimension. The kernels' output and every gradient are
    within one rounding of the plain block's; and each is as far from a float64 reference
    as the plain block's (one rounding of the half-precision product, then its GELU)."""
    torch.manual_seed(0)
    up, down = nn.Linear(24, 40), nn.Linear(40, 24)
    hidden = torch.randn(2, 19, 24, requires_grad=True)
    plain = block_run(plain_feed_forward, hidden, up, down, dtype)
    fused = block_run(feed_forward, hidden, up, down, dtype)
    wide = hidden.detach().double().requires_grad_()
    up, down = copy.deepcopy(up).double(), copy.deepcopy(down).double()
    reference = block_run(plain_feed_forward, wide, up, down, torch.float32)  # no autocast
    unit = {torch.float32: 2**-23, torch.bfloat16: 2**-8, torch.float16: 2**-11}[dtype]
    for got, want, exact in zip(fused, plain, reference, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        scale = exact.abs().max().item()
        assert (got.double() - want.double()).abs().max().item() <= 8 * unit * scale
        error = (got.double() - exact).abs().max().item()
        assert error <= 1.25 * (want.double() - exact).abs().max().item() + 8 * unit * scale


def test_the_tma_tiles_give_the_pointer_tiles_bytes(monkeypatch):
    """The tiles a Hopper GPU may load through TMA descriptors (zeros past the edges), in the
    interpreter: the block's output and every gradient are the same bytes as through
    pointers (masked loads), in each dtype, ragged edges included."""
    from trainer import triton_kernels

    torch.manual_seed(0)
    up, down = nn.Linear(24, 40), nn.Linear(40, 24)
    hidden = torch.randn(2, 19, 24, requires_grad=True)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        runs = []
        for tma in (False, True):
            monkeypatch.setattr(triton_kernels, "INTERPRETER_TMA", tma)
            runs.append(block_run(feed_forward, hidden, up, down, dtype))
        assert all(torch.equal(*pair) for pair in zip(*runs, strict=True)), dtype
    rows = torch.empty(5, 24, dtype=torch.bfloat16)  # 48 bytes apart
    assert triton_kernels.descriptors_fit(rows, torch.empty(24, 8, dtype=torch.float16))
    assert not triton_kernels.descriptors_fit(rows[:, 1:])  # starts 2 bytes in: unaligned
    assert not triton_kernels.descriptors_fit(torch.empty(4, 20, dtype=torch.bfloat16))
    assert not triton_kernels.descriptors_fit(rows.t())  # its rows are not contiguous
    assert not triton_kernels.tma_possible(rows, rows)  # on the CPU


def test_the_block_compiles_as_one_graph_with_the_same_results():
    torch.manual_seed(1)
    up, down = nn.Linear(24, 40), nn.Linear(40, 24)
    hidden = torch.randn(38, 24, requires_grad=True)
    eager = block_run(feed_forward, hidden, up, down, torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(feed_forward, backend="aot_eager", fullgraph=True)
    again = block_run(compiled, hidden, up, down, torch.bfloat16)
    for got, want in zip(again, eager, strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("unpad", ["off", "on"])
def test_the_model_takes_the_kernels_with_the_same_results_and_state_dict(unpad):
    """The tiny model with and without the kernels, on the padded batch and on its real
    tokens (--unpad on): the same parameter names, losses, logits and gradients (fp32)."""
    plain, fused = model(unpad), model(unpad)
    fused.use_kernels(ffn_epilogue=True)
    assert [layer.ffn_epilogue for layer in fused.layers] == [True, True]
    assert list(plain.state_dict()) == list(fused.state_dict())
    assert_equal_within(step(plain), step(fused), atol=2e-6)


def test_a_run_with_the_kernels_trains_as_the_plain_one(sample_shards, tmp_path, monkeypatch):
    """3 steps of `bertkit train --ffn-epilogue on --add-norm on`, without dropout, on
    micro-batches of 2 (2 × 128 rows, still several of the tiles below), with the kernels
    let run on the CPU (the interpreter; the run's own checks find a CPU, and for the
    epilogue fp32, in their way): the plain run's losses. (tests/test_add_norm.py
    resumes a run with both kernels and dropout.)"""
    monkeypatch.setattr(ffn_epilogue, "ffn_epilogue_obstacles", lambda *args: [])
    monkeypatch.setattr(add_norm, "gpu_obstacles", lambda device: [])
    monkeypatch.setattr(
        "trainer.triton_kernels.INTERPRETER_TILE",
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 4},
    )
    launches = []
    real = ffn_epilogue.kernels
    monkeypatch.setattr(ffn_epilogue, "kernels", lambda: launches.append(1) or real())
    losses = {}
    for mode in ("on", "off"):
        run = tmp_path / mode
        assert train.run([*TINY_RUN, "--shards", str(sample_shards), "--output", str(run),
                          "--dropout", "0", "--ffn-epilogue", mode, "--add-norm", mode,
                          "--max-steps", "3", "--micro-batch-size", "2"]) == 0  # fmt: skip
        losses[mode] = [metrics(run)[step]["loss"] for step in (1, 2, 3)]
    # steps × layers × (forward, backward), then the held-out batch's 2 forwards
    assert len(launches) == 3 * 2 * 2 + 2
    assert losses["on"] == pytest.approx(losses["off"], rel=1e-5, abs=0)


def test_a_cpu_run_says_why_on_takes_the_plain_ops_and_auto_or_off_say_nothing(
    sample_shards, tmp_path, caplog
):
    """--ffn-epilogue and --add-norm, both given the same value."""
    said = {}
    for mode in ("on", "auto", "off"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="bertkit.train"):
            assert train.run([*TINY_RUN, "--shards", str(sample_shards), "--output",
                              str(tmp_path / mode), "--max-steps", "1", "--ffn-epilogue",
                              mode, "--add-norm", mode]) == 0  # fmt: skip
        said[mode] = [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith(("--ffn-epilogue", "--add-norm"))
        ]
    assert said == {
        "on": [
            "--ffn-epilogue on: the plain feed-forward block, since the epilogue kernels cannot "
            "run: they run on a CUDA GPU, and this run is on cpu; they take bf16 or fp16, and "
            "this run computes in float32",
            "--add-norm on: the plain dropout, add and LayerNorm, since the add-norm kernels "
            "cannot run: they run on a CUDA GPU, and this run is on cpu",
        ],
        "auto": [],
        "off": [],
    }


SIZES = (32768, 768, 3072)
SHAPE = "32,768 rows, 768 → 3072 → 768"


def test_each_mode_s_choice_and_line(monkeypatch):
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    assert choose_ffn_epilogue("off", cuda, torch.bfloat16, "off", SIZES) == (False, None)
    assert choose_ffn_epilogue("auto", CPU, torch.bfloat16, "off", SIZES) == (False, None)
    monkeypatch.setattr(kernel_choice, "triton_available", lambda: False)
    assert choose_ffn_epilogue("auto", cuda, torch.float32, "rowwise", SIZES) == (
        False,
        "--ffn-epilogue auto: the plain feed-forward block, since the epilogue kernels cannot "
        "run: this torch has no Triton (torch's CUDA wheels bring it); they take bf16 or fp16, "
        "and this run computes in float32; --fp8 rowwise makes the block's Linears FP8 ones",
    )
    monkeypatch.setattr(kernel_choice, "triton_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (7, 5))
    assert choose_ffn_epilogue("auto", cuda, torch.float16, "off", SIZES) == (
        False,
        "--ffn-epilogue auto: the plain feed-forward block, since the epilogue kernels cannot "
        "run: Tesla T4 is of compute capability 7.5, under 8.0, the oldest Triton supports",
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    assert choose_ffn_epilogue("on", cuda, torch.float16, "off", SIZES) == (
        True,
        "--ffn-epilogue on: each layer's feed-forward block takes its bias and GELU in the "
        "matmul's epilogue (Triton)",
    )
    # auto times both blocks, and every rank's timings are summed before choosing.
    timed, summed = [], []
    monkeypatch.setattr(
        ffn_epilogue, "time_blocks", lambda *args: timed.append(args) or (2, 3, None)
    )
    use, line = choose_ffn_epilogue(
        "auto",
        cuda,
        torch.bfloat16,
        "off",
        SIZES,
        True,
        lambda t: summed.append(t.tolist()) or t * 2,
    )
    assert timed == [(SIZES, torch.bfloat16, cuda, True)] and summed == [[2.0, 3.0]]
    assert (use, line) == FFN_EPILOGUE.auto_choice(4.0, 6.0, SHAPE)
    # Kernels that failed or disagreed here, or on another rank: the plain block everywhere.
    said = "the epilogue kernels failed (CompilationError: at 12:4)"
    monkeypatch.setattr(ffn_epilogue, "time_blocks", lambda *args: (2, 3, said))
    assert choose_ffn_epilogue("auto", cuda, torch.bfloat16, "off", SIZES) == (
        False,
        f"--ffn-epilogue auto: the plain feed-forward block: {said}",
    )
    monkeypatch.setattr(ffn_epilogue, "time_blocks", lambda *args: (2, 3, None))
    elsewhere = torch.tensor([4.0, math.inf], dtype=torch.float64)
    assert choose_ffn_epilogue(
        "auto", cuda, torch.bfloat16, "off", SIZES, False, lambda t: elsewhere
    ) == (
        False,
        "--ffn-epilogue auto: the plain feed-forward block: the epilogue kernels failed or "
        "disagreed on another rank of the job",
    )


def test_a_resume_takes_the_recorded_kernels_untimed_on_the_same_kind_of_device(
    monkeypatch, caplog
):
    """A resumed checkpoint's `kernels` record (trainer/levers.py): taken again under auto
    where it was made on this kind of device, timed again (and said) elsewhere; `on`, `off`
    and an obstacle come first."""
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))

    def untimed(*args):
        raise AssertionError("timed")

    monkeypatch.setattr(ffn_epilogue, "time_blocks", untimed)
    taken = (
        "--ffn-epilogue auto: each layer's feed-forward block takes its bias and GELU in the "
        "matmul's epilogue (Triton), as at the run's start (its checkpoint's record)"
    )
    for earlier, line in ((True, taken), (False, "--ffn-epilogue auto: the plain feed-forward "
                          "block, as at the run's start (its checkpoint's record)")):  # fmt: skip
        assert choose_ffn_epilogue("auto", cuda, torch.bfloat16, "off", SIZES, earlier=earlier) == (
            earlier,
            line,
        )
    assert choose_ffn_epilogue("off", cuda, torch.bfloat16, "off", SIZES, earlier=True) == (
        False,
        None,
    )
    assert choose_ffn_epilogue("auto", cuda, torch.float32, "off", SIZES, earlier=True)[0] is False

    # The whole choice on a CPU run whose kernels may run (the obstacles lifted).
    env = Distributed(rank=0, world_size=1, local_rank=0, device=CPU)
    config = TrainConfig(shards="s", output="o", micro_batch_size=2)
    net = BertForPreTraining(config_for("tiny", 64))
    monkeypatch.setattr(ffn_epilogue, "ffn_epilogue_obstacles", lambda *args: [])
    monkeypatch.setattr(add_norm, "gpu_obstacles", lambda device: [])
    record = {KernelsKey.DEVICE: "cpu", KernelsKey.FFN_EPILOGUE: True, KernelsKey.ADD_NORM: False}
    assert choose_kernels(net, config, env, torch.bfloat16, 128, record) == record
    assert [(layer.ffn_epilogue, layer.add_norm) for layer in net.layers] == [(True, False)] * 2
    monkeypatch.setattr(ffn_epilogue, "time_blocks", lambda *args: (1.0, 2.0, None))
    monkeypatch.setattr(add_norm, "time_add_norm", lambda *args: (2.0, 1.0, None))
    elsewhere = {**record, KernelsKey.DEVICE: "NVIDIA A100-SXM4-80GB"}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bertkit.train"):
        assert choose_kernels(net, config, env, torch.bfloat16, 128, elsewhere) == {
            KernelsKey.DEVICE: "cpu",
            KernelsKey.FFN_EPILOGUE: False,
            KernelsKey.ADD_NORM: True,
        }
    assert caplog.records[0].getMessage() == (
        "--resume: the run took its kernels on NVIDIA A100-SXM4-80GB; on cpu auto times them again"
    )


def test_a_disagreement_of_more_than_a_few_roundings_is_named():
    """auto's check of the kernels' results on the device against the plain block's."""
    plain = (torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.25]))
    near = (torch.tensor([1.0, -2.0 + 2**-6]), torch.tensor([0.5, 0.25]))  # 2 bf16 roundings
    name = "the epilogue kernels"
    assert disagreement(plain, near, torch.bfloat16, name) is None
    far = (torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.3]))
    assert disagreement(plain, far, torch.bfloat16, name) == (
        "the epilogue kernels' gradient 1 differed from the plain ops' on this GPU (by 0.05, "
        "the largest value 0.5)"
    )
    nan = (torch.tensor([1.0, float("nan")]), plain[1])
    assert disagreement(plain, nan, torch.bfloat16, name).startswith(
        "the epilogue kernels' output differed from the plain ops' on this GPU (by nan"
    )


def test_auto_takes_the_kernels_only_where_they_were_faster():
    assert FFN_EPILOGUE.auto_choice(1.2, 1.0, SHAPE) == (
        True,
        "--ffn-epilogue auto: each layer's feed-forward block takes its bias and GELU in the "
        "matmul's epilogue (Triton): 1.20× as fast as the plain feed-forward block, timed "
        "forward and backward on 32,768 rows, 768 → 3072 → 768",
    )
    assert FFN_EPILOGUE.auto_choice(1.0, 1.25, SHAPE) == (
        False,
        "--ffn-epilogue auto: the plain feed-forward block: the epilogue kernels ran at 0.80× "
        "its speed, timed forward and backward on 32,768 rows, 768 → 3072 → 768",
    )
    assert FFN_EPILOGUE.auto_choice(1.0, 1.0, SHAPE)[0] is False  # a tie keeps cuBLAS
