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

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainer.kernel_choice import KernelLever, gpu_obstacles, kernels, time_and_check

_HALF = (torch.bfloat16, torch.float16)


@torch.library.custom_op("bertkit::ffn_up", mutates_args=())
def ffn_up(hidden: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """hidden (M, K) · weight (N, K)ᵀ + bias → (pre, gelu(pre)), each (M, N) in hidden's
    dtype: nn.Linear's weight layout, the product and its GELU in one kernel."""
    pre = hidden.new_empty(hidden.shape[0], weight.shape[0])
    out = torch.empty_like(pre)
    kernels().launch_matmul_gelu(
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
    kernels().launch_matmul_gelu(
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


FFN_EPILOGUE = KernelLever(
    "--ffn-epilogue",
    "the epilogue kernels",
    "the plain feed-forward block",
    "each layer's feed-forward block takes its bias and GELU in the matmul's epilogue (Triton)",
)


def ffn_epilogue_obstacles(device: torch.device, dtype: torch.dtype, fp8: str) -> list[str]:
    """Why the epilogue kernels cannot run, each a phrase; none where they can."""
    found = gpu_obstacles(device)
    if dtype not in _HALF:
        found.append(f"they take bf16 or fp16, and this run computes in {str(dtype)[6:]}")
    if fp8 != "off":
        found.append(f"--fp8 {fp8} makes the block's Linears FP8 ones")
    return found


def time_blocks(
    sizes: tuple[int, int, int], dtype: torch.dtype, device: torch.device, compiled: bool
) -> tuple[float, float, str | None]:
    """One layer's block forward and backward on `sizes` (rows, hidden, intermediate),
    plain and through the kernels, compiled where the run compiles
    (kernel_choice.time_and_check: milliseconds each, and why not the kernels)."""
    tokens, hidden, intermediate = sizes
    generator = torch.Generator(device=device).manual_seed(0)
    up, down = nn.Linear(hidden, intermediate), nn.Linear(intermediate, hidden)
    up, down = up.to(device=device, dtype=dtype), down.to(device=device, dtype=dtype)
    rows = torch.randn(tokens, hidden, device=device, dtype=dtype, generator=generator)
    rows.requires_grad_(True)

    def run(block: Callable[..., Tensor]) -> Callable[[], list[Tensor]]:
        step = torch.compile(block) if compiled else block

        def once() -> list[Tensor]:
            rows.grad = None
            out = step(rows, up, down)
            out.float().square().sum().backward()
            return [out, rows.grad]

        return once

    return time_and_check(run(plain_feed_forward), run(feed_forward), dtype, FFN_EPILOGUE.kernels)


def choose_ffn_epilogue(
    mode: str,
    device: torch.device,
    dtype: torch.dtype,
    fp8: str,
    sizes: tuple[int, int, int],
    compiled: bool = False,
    agree: Callable[[Tensor], Tensor] = lambda times: times,
    earlier: bool | None = None,
) -> tuple[bool, str | None]:
    """Whether the run's feed-forward blocks take the epilogue kernels under `--ffn-epilogue
    mode` (KERNEL_MODES), and the line its start logs (KernelLever.choose). `sizes`:
    the rows of one micro-batch, hidden and intermediate sizes, the shape auto times on,
    compiled where the run compiles (`compiled`); `earlier`: auto's choice at the run's
    start, where a resume found it."""
    tokens, hidden, intermediate = sizes
    return FFN_EPILOGUE.choose(
        mode,
        device,
        ffn_epilogue_obstacles(device, dtype, fp8),
        lambda: time_blocks(sizes, dtype, device, compiled),
        agree,
        f"{tokens:,} rows, {hidden} → {intermediate} → {hidden}",
        earlier,
    )
