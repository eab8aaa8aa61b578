"""Dropout, the residual add and LayerNorm in one kernel each way (`bertkit train
--add-norm`): LN(x + dropout(y)) after each encoder layer's attention and feed-forward.

    out = add_norm(hidden, branch, layer.output_norm, dropout=0.1)   # LN(hidden + drop(branch))
    use, line = choose_add_norm("auto", device, torch.bfloat16, (32768, 768), 0.1, compiled=True)

The plain ops (eager) are three kernels, and under `--compile` inductor fuses them into one,
which keeps the dropout mask for backward. Here one Triton kernel per row draws the mask
(Philox, from a seed), adds, normalizes, and keeps the sum and the row's statistics; in
backward one kernel per block of rows draws the same mask again from the seed instead of
reading it back, and gives the residual's and the branch's gradients with partial sums of
the LayerNorm's weight and bias gradients.

- Numerically the plain ops' equal, rounding where they round: the dropout's output to the
  branch's dtype, the sum to the promoted dtype (fp32 under autocast, where LayerNorm runs in
  fp32), the statistics in fp32. Without dropout the results are theirs up to the order of a
  row's sums; with dropout the mask is another draw of the same distribution (each element
  kept with probability 1 - p, the kept scaled by 1 / (1 - p)), from a seed per call that
  torch's generator on the device draws (no wait for the host; under CUDA graphs each replay
  draws anew), so a seeded run gives the same bytes and `--resume` (which keeps the
  generators' states) goes on with the same masks.
- Where: a CUDA GPU with Triton, any precision. auto (the default) times both, forward and
  backward at the run's shape and dropout (compiled where the run compiles), checks the
  kernels' results without dropout against the plain ops', and keeps the faster
  (trainer/kernel_choice.py); `on` takes the kernels untimed; `off` the plain ops.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainer.kernel_choice import KernelLever, gpu_obstacles, kernels, time_and_check

ADD_NORM = KernelLever(
    "--add-norm",
    "the add-norm kernels",
    "the plain dropout, add and LayerNorm",
    "each layer's dropout, residual add and LayerNorm run in one kernel each way (Triton)",
)
_SEEDS = 2**31 - 1  # Philox's seed, drawn per call from torch's generator on the device


@torch.library.custom_op("bertkit::add_norm", mutates_args=())
def add_norm_forward(
    x: Tensor, y: Tensor, gamma: Tensor, beta: Tensor, p: float, seed: Tensor, eps: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """x, y (M, H) → (LN(x + dropout_p(y)), the sum, its rows' mean and 1/std): the first
    two in x's and y's promoted dtype, the statistics fp32. `seed`: a 0-dim int64 tensor on
    x's device, read there by the kernel (unread without dropout)."""
    out, total, mean, rstd = _forward_outputs(x, y)
    outputs = (out, total, mean, rstd)
    kernels().launch_add_norm_forward(x, y, gamma, beta, outputs, p, seed, eps)
    return outputs


def _forward_outputs(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    dtype = torch.promote_types(x.dtype, y.dtype)
    out = x.new_empty(x.shape, dtype=dtype)
    stats = x.new_empty(x.shape[0], dtype=torch.float32)
    return out, torch.empty_like(out), stats, torch.empty_like(stats)


@add_norm_forward.register_fake
def _add_norm_shapes(x, y, gamma, beta, p, seed, eps):
    return _forward_outputs(x, y)


@torch.library.custom_op("bertkit::add_norm_grad", mutates_args=())
def add_norm_backward(
    grad: Tensor,
    total: Tensor,
    gamma: Tensor,
    mean: Tensor,
    rstd: Tensor,
    p: float,
    seed: Tensor,
    x_dtype: torch.dtype,
    y_dtype: torch.dtype,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients of x, y (in their dtypes), gamma and beta (fp32) from the output's."""
    dx, dy = _backward_outputs(grad, x_dtype, y_dtype)
    saved = (total, gamma, mean, rstd)
    weight, bias = kernels().launch_add_norm_backward(grad, saved, (dx, dy), p, seed)
    return dx, dy, weight.sum(0), bias.sum(0)


def _backward_outputs(grad: Tensor, x_dtype: torch.dtype, y_dtype: torch.dtype):
    return grad.new_empty(grad.shape, dtype=x_dtype), grad.new_empty(grad.shape, dtype=y_dtype)


@add_norm_backward.register_fake
def _add_norm_grad_shapes(grad, total, gamma, mean, rstd, p, seed, x_dtype, y_dtype):
    dx, dy = _backward_outputs(grad, x_dtype, y_dtype)
    width = grad.shape[1]
    return (
        dx,
        dy,
        gamma.new_empty(width, dtype=torch.float32),
        gamma.new_empty(width, dtype=torch.float32),
    )


class _AddNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, gamma, beta, p, eps, seed):
        out, total, mean, rstd = torch.ops.bertkit.add_norm(x, y, gamma, beta, p, seed, eps)
        ctx.save_for_backward(total, gamma, mean, rstd, seed)
        ctx.p, ctx.dtypes = p, (x.dtype, y.dtype)
        return out

    @staticmethod
    def backward(ctx, grad):
        total, gamma, mean, rstd, seed = ctx.saved_tensors
        dx, dy, weight, bias = torch.ops.bertkit.add_norm_grad(
            grad.contiguous(), total, gamma, mean, rstd, ctx.p, seed, *ctx.dtypes
        )
        return dx, dy, weight, bias, None, None, None


def add_norm(residual: Tensor, branch: Tensor, norm: nn.LayerNorm, dropout: float) -> Tensor:
    """norm(residual + dropout(branch)) through the kernels, on (…, H) rows (`dropout`: the
    rate in force, 0 in evaluation)."""
    shape = residual.shape
    width = shape[-1]
    x = residual.reshape(-1, width).contiguous()
    y = branch.reshape(-1, width).contiguous()
    # The seed drawn on the device from torch's generator there: no wait for the host, and
    # under CUDA graphs each replay draws anew. Without dropout nothing reads it.
    seed = torch.empty((), dtype=torch.int64, device=x.device)
    if dropout:
        seed = torch.randint(_SEEDS, (), dtype=torch.int64, device=x.device)
    out = _AddNorm.apply(x, y, norm.weight, norm.bias, float(dropout), norm.eps, seed)
    return out.view(shape)


def plain_add_norm(residual: Tensor, branch: Tensor, norm: nn.LayerNorm, dropout: float) -> Tensor:
    """The plain ops, as the model writes them without the kernels."""
    if dropout:
        branch = F.dropout(branch, dropout, training=True)
    return norm(residual + branch)


def time_add_norm(
    rows: int,
    width: int,
    dropout: float,
    dtype: torch.dtype,
    device: torch.device,
    compiled: bool,
) -> tuple[float, float, str | None]:
    """Both ways forward and backward on `rows` rows at `dropout` (compiled where the run
    compiles), as the encoder calls them: the residual in fp32 and the branch in `dtype`
    under autocast. Their results are compared without dropout (kernel_choice)."""
    generator = torch.Generator(device=device).manual_seed(0)
    norm = nn.LayerNorm(width).to(device)
    residual = torch.randn(rows, width, device=device, generator=generator, requires_grad=True)
    branch = torch.randn(rows, width, device=device, generator=generator).to(dtype)
    branch.requires_grad_(True)

    def run(block: Callable[..., Tensor], rate: float) -> Callable[[], list[Tensor]]:
        step = torch.compile(block) if compiled else block

        def once() -> list[Tensor]:
            residual.grad = branch.grad = norm.weight.grad = None
            out = step(residual, branch, norm, rate)
            out.square().sum().backward()
            return [out, residual.grad, branch.grad, norm.weight.grad]

        return once

    checks = (run(plain_add_norm, 0.0), run(add_norm, 0.0))
    return time_and_check(
        run(plain_add_norm, dropout), run(add_norm, dropout), dtype, ADD_NORM.kernels, checks
    )


def choose_add_norm(
    mode: str,
    device: torch.device,
    dtype: torch.dtype,
    sizes: tuple[int, int],
    dropout: float,
    compiled: bool,
    agree: Callable[[Tensor], Tensor] = lambda times: times,
    earlier: bool | None = None,
) -> tuple[bool, str | None]:
    """Whether the run's layers take the add-norm kernels under `--add-norm mode`, and the
    line its start logs (KernelLever.choose). `sizes`: a micro-batch's rows and the hidden
    size; `dropout`: the hidden dropout; `earlier`: auto's choice at the run's start, where
    a resume found it."""
    rows, width = sizes
    return ADD_NORM.choose(
        mode,
        device,
        gpu_obstacles(device),
        lambda: time_add_norm(rows, width, dropout, dtype, device, compiled),
        agree,
        f"{rows:,} rows of {width}, dropout {dropout:g}",
        earlier,
    )
