"""The feed-forward block with its bias and GELU in the matmul's epilogue (`bertkit train
--ffn-epilogue`): one Triton kernel computes x·W1ᵀ + b1 and its GELU while the product is
still in registers, and in backward one computes (dz·W2)·GELU'(pre) the same way.

    z = feed_forward(hidden, layer.intermediate, layer.output)   # gelu(h·W1ᵀ+b1)·W2ᵀ+b2
    use, line = choose_ffn_epilogue("auto", device, torch.bfloat16, config, tokens, fp8="off")

The plain block (cuBLAS's product, then a GELU kernel that reads the product back) writes
the (tokens × intermediate) product once and reads it again, forward and backward: for
BERT-base at batch 256 × 128 that is 200 MB each way per layer, the GELU bucket of the
issue's profile. Here the GELU is applied where the product is made, so it never round-trips
through memory. The rest of the block stays with torch: the second product, and the weight
and bias gradients (cuBLAS), which have no element-wise work to fuse.

- Numerically the plain block's equal: the product plus bias is rounded to the run's dtype
  (bf16 or fp16) before its GELU is taken, as the plain block rounds cuBLAS's output, and
  the GELU is the exact erf form in fp32, as F.gelu computes it; backward rounds dz·W2 before
  multiplying by GELU'(pre). Only the order of the products' sums differs, as between any
  two matmul kernels.
- Where: a CUDA GPU with Triton (torch's CUDA wheels bring it), under bf16 or fp16
  autocast, and not with `--fp8` (its Linears are torchao's). Elsewhere the plain block.
- auto (the default) times both blocks, forward and backward, on the run's own shape at its
  start and keeps the faster (Triton's kernel is tuned over a few tile shapes first); every
  rank of a job sums the timings, so all take the same block. `on` takes the kernel without
  timing; `off` the plain block.
- The two kernels are custom ops (`bertkit::ffn_up`, `bertkit::ffn_gelu_grad`) with shape
  functions, so torch.compile traces the block as one graph and schedules the rest around
  them. On the CPU, Triton's interpreter (TRITON_INTERPRET=1 before the first use) runs the
  same kernels in NumPy: the tests check their numerics there.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FFN_EPILOGUE_MODES = ("auto", "on", "off")
_HALF = (torch.bfloat16, torch.float16)
_TIMED_STEPS = 10  # forward+backward of one layer's block, after warm-up and tuning


def triton_available() -> bool:
    """Whether Triton can be imported (torch's CUDA wheels bring it; its CPU wheel does not)."""
    return importlib.util.find_spec("triton") is not None


@functools.cache
def _kernels() -> Any:
    """trainer/ffn_kernels.py, imported at first use: Triton is optional, and its
    interpreter is chosen (TRITON_INTERPRET) when the kernel is defined."""
    return importlib.import_module("trainer.ffn_kernels")


@torch.library.custom_op("bertkit::ffn_up", mutates_args=())
def ffn_up(hidden: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """hidden (M, K) · weight (N, K)ᵀ + bias → (pre, gelu(pre)), each (M, N) in hidden's
    dtype: nn.Linear's weight layout, the product and its GELU in one kernel."""
    pre = hidden.new_empty(hidden.shape[0], weight.shape[0])
    out = torch.empty_like(pre)
    _kernels().launch(
        hidden,
        weight,
        bias,
        pre,
        out,
        b_strides=(weight.stride(1), weight.stride(0)),
        backward=False,
    )
    return pre, out


@ffn_up.register_fake
def _ffn_up_shape(hidden: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    pre = hidden.new_empty(hidden.shape[0], weight.shape[0])
    return pre, torch.empty_like(pre)


@torch.library.custom_op("bertkit::ffn_gelu_grad", mutates_args=())
def ffn_gelu_grad(grad: Tensor, weight: Tensor, pre: Tensor) -> Tensor:
    """grad (M, K) · weight (K, N) → the GELU's input gradient (M, N): the product (the
    gradient at the GELU's output, rounded to pre's dtype) times GELU'(pre), in one kernel."""
    out = torch.empty_like(pre)
    _kernels().launch(
        grad, weight, pre, pre, out, b_strides=(weight.stride(0), weight.stride(1)), backward=True
    )
    return out


@ffn_gelu_grad.register_fake
def _ffn_gelu_grad_shape(grad: Tensor, weight: Tensor, pre: Tensor) -> Tensor:
    return torch.empty_like(pre)


class _FeedForward(torch.autograd.Function):
    """gelu(x·W1ᵀ + b1)·W2ᵀ + b2 on (M, H) rows, every tensor in one dtype."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
        pre, activation = torch.ops.bertkit.ffn_up(x, w1, b1)
        ctx.save_for_backward(x, w1, w2, pre, activation)
        return torch.addmm(b2, activation, w2.t())

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, ...]:
        x, w1, w2, pre, activation = ctx.saved_tensors
        grad = grad.contiguous()
        grad_pre = torch.ops.bertkit.ffn_gelu_grad(grad, w2, pre)
        return (
            grad_pre @ w1,
            grad_pre.t() @ x,
            grad_pre.sum(0),
            grad.t() @ activation,
            grad.sum(0),
        )


def feed_forward(hidden: Tensor, up: nn.Linear, down: nn.Linear) -> Tensor:
    """`down(gelu(up(hidden)))` through the epilogue kernels, on (…, H) rows: under autocast
    everything in its dtype first (the casts' gradients bring the weights' back to fp32, as
    autocast's own casts do)."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    shape = hidden.shape
    rows = hidden.reshape(-1, shape[-1]).to(dtype).contiguous()
    tensors = (up.weight, up.bias, down.weight, down.bias)
    out = _FeedForward.apply(rows, *(tensor.to(dtype) for tensor in tensors))
    return out.view(*shape[:-1], out.shape[-1])


def plain_feed_forward(hidden: Tensor, up: nn.Linear, down: nn.Linear) -> Tensor:
    """The block as the model writes it without the kernel (F.gelu: the exact erf form)."""
    return down(F.gelu(up(hidden)))


def ffn_epilogue_obstacles(device: torch.device, dtype: torch.dtype, fp8: str) -> list[str]:
    """Why the epilogue kernels cannot run, each a phrase; none where they can."""
    found = []
    if device.type != "cuda":
        found.append(f"they run on a CUDA GPU, and this run is on {device.type}")
    elif not triton_available():
        found.append("this torch has no Triton (torch's CUDA wheels bring it)")
    if dtype not in _HALF:
        found.append(f"they take bf16 or fp16, and this run computes in {str(dtype)[6:]}")
    if fp8 != "off":
        found.append(f"--fp8 {fp8} makes the block's Linears FP8 ones")
    return found


def time_blocks(
    tokens: int, hidden: int, intermediate: int, dtype: torch.dtype, device: torch.device
) -> tuple[float, float, str | None]:
    """Median milliseconds of one layer's block, forward and backward, on `tokens` rows: the
    plain block's, then the kernels' (tuned first, outside the timing), and why the kernels
    may not be used here (then their time is inf): they failed, or their output or input
    gradient on these rows is not the plain block's within a few roundings."""
    generator = torch.Generator(device=device).manual_seed(0)
    up, down = nn.Linear(hidden, intermediate), nn.Linear(intermediate, hidden)
    up, down = up.to(device=device, dtype=dtype), down.to(device=device, dtype=dtype)
    rows = torch.randn(tokens, hidden, device=device, dtype=dtype, generator=generator)
    rows.requires_grad_(True)
    times, results = [], []
    for block in (plain_feed_forward, feed_forward):
        try:
            for _ in range(3):  # warm-up: Triton's tuning and compilation, cuBLAS's heuristics
                rows.grad = None
                out = block(rows, up, down)
                out.float().square().sum().backward()
            results.append((out.detach().float(), rows.grad.float()))
            samples = []
            for _ in range(_TIMED_STEPS):
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                block(rows, up, down).sum().backward()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
        except Exception as error:  # a kernel's failure on this GPU: the plain block
            if block is plain_feed_forward:
                raise
            first = str(error).splitlines()[0] if str(error) else ""
            return (
                times[0],
                math.inf,
                f"the epilogue kernels failed ({type(error).__name__}: {first})",
            )
        times.append(statistics.median(samples))
    return times[0], times[1], _disagreement(results[0], results[1], dtype)


def _disagreement(
    plain: tuple[Tensor, Tensor], fused: tuple[Tensor, Tensor], dtype: torch.dtype
) -> str | None:
    """Why the kernels' (output, input gradient) are not the plain block's, or None."""
    rounding = torch.finfo(dtype).eps
    for name, want, got in zip(("output", "input gradient"), plain, fused, strict=True):
        scale = want.abs().max().item()
        difference = (got - want).abs().max().item()
        if not difference <= 8 * rounding * scale:  # NaN included
            return (
                f"the epilogue kernels' {name} differed from the plain block's on this GPU (by "
                f"{difference:.3g}, the largest value {scale:.3g})"
            )
    return None


def choose_ffn_epilogue(
    mode: str,
    device: torch.device,
    dtype: torch.dtype,
    fp8: str,
    sizes: tuple[int, int, int],
    agree: Callable[[Tensor], Tensor] = lambda times: times,
) -> tuple[bool, str | None]:
    """Whether the run's feed-forward blocks take the epilogue kernels under `--ffn-epilogue
    mode` (FFN_EPILOGUE_MODES), and the line its start logs (None: nothing to say). `sizes`:
    the rows of one micro-batch, hidden and intermediate sizes, the shape auto times on;
    `agree` sums the (plain, kernel) timings over a job's ranks, so all decide alike."""
    if mode == "off":
        return False, None
    obstacles = ffn_epilogue_obstacles(device, dtype, fp8)
    if obstacles:
        if mode == "auto" and device.type != "cuda":
            return False, None  # a CPU run: no choice to make, nothing to say
        return False, (
            f"--ffn-epilogue {mode}: the plain feed-forward block, since the epilogue kernels "
            f"cannot run: {'; '.join(obstacles)}"
        )
    if mode == "on":
        return True, (
            "--ffn-epilogue on: each layer's feed-forward block takes its bias and GELU in the "
            "matmul's epilogue (Triton)"
        )
    plain, fused, problem = time_blocks(*sizes, dtype, device)
    fused = math.inf if problem else fused  # every rank then takes the plain block
    plain, fused = agree(torch.tensor([plain, fused], dtype=torch.float64)).tolist()
    if math.isinf(fused):  # here (the reason) or on another rank of the job
        why = problem or "the epilogue kernels failed or disagreed on another rank of the job"
        return False, f"--ffn-epilogue auto: the plain feed-forward block: {why}"
    return auto_choice(plain, fused, sizes)


def auto_choice(plain: float, fused: float, sizes: tuple[int, int, int]) -> tuple[bool, str]:
    """auto's choice from the two blocks' timings (milliseconds, or their sums over ranks,
    forward and backward on `sizes`), and its line: the kernels only where faster."""
    tokens, hidden, intermediate = sizes
    timed = f"timed forward and backward on {tokens:,} rows, {hidden} → {intermediate} → {hidden}"
    if fused < plain:
        return True, (
            "--ffn-epilogue auto: each layer's feed-forward block takes its bias and GELU in the "
            f"matmul's epilogue (Triton): {plain / fused:.2f}× as fast as the plain block, {timed}"
        )
    return False, (
        "--ffn-epilogue auto: the plain feed-forward block: the epilogue kernels ran at "
        f"{plain / fused:.2f}× its speed, {timed}"
    )
