"""bertkit's Triton kernels. Imported only where Triton is installed (trainer/kernel_choice.py
`kernels()`); TRITON_INTERPRET=1 before Triton's import runs them in Triton's NumPy
interpreter, on the CPU (the tests).

- `matmul_gelu` (trainer/ffn_epilogue.py): a matmul whose epilogue adds the bias and takes
  the GELU (forward), or multiplies by the GELU's slope (backward). Its tiles load through
  pointers, or on Hopper and newer through TMA descriptors, the autotuner's choice.
- `add_norm_forward`, `add_norm_backward` (trainer/add_norm.py): a row's dropout, residual
  add and LayerNorm, and their gradients, the dropout mask drawn again in backward from the
  forward's seed instead of kept.

    launch_matmul_gelu(a, b, bias, pre, out, b_strides=(b.stride(0), b.stride(1)), backward=False)
"""

from __future__ import annotations

import inspect

import torch
import triton
import triton.language as tl
from torch import Tensor

try:  # Triton 3.3 and later: host-side tensor descriptors (Hopper's TMA)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:
    TensorDescriptor = None

_AUTOTUNE_OPTIONS = inspect.signature(triton.autotune).parameters
# The interpreter's tile: small, so the tests' shapes span several tiles and a ragged edge.
INTERPRETER_TILE = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2}
# Whether the interpreter loads the tiles through tensor descriptors, as a GPU's TMA tiles do
# (the tests set it).
INTERPRETER_TMA = False
# Tile shapes Triton's autotuner times on a GPU, (M, N, K, group, stages, warps): the
# shapes that serve bf16 products of this size well on Ampere and Hopper.
GPU_TILES = (
    (128, 256, 64, 8, 3, 8),
    (128, 128, 64, 8, 4, 8),
    (128, 128, 32, 8, 4, 4),
    (64, 256, 32, 8, 4, 4),
    (128, 64, 32, 8, 4, 4),
    (256, 128, 64, 8, 3, 8),
)


@triton.jit
def rounded(x, dtype: tl.constexpr, INTERPRETED: tl.constexpr):
    # fp32 `x` rounded to `dtype` (to nearest, ties to even), back in fp32. A GPU's
    # conversion rounds so; the interpreter's to bf16 truncates, so there the bits are
    # rounded first (NaN and inf do not occur in the products of finite weights).
    if INTERPRETED and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        x = bits.to(tl.float32, bitcast=True)
    return x.to(dtype).to(tl.float32)


@triton.jit
def matmul_gelu(
    a,
    b,
    bias,
    pre,
    out,
    a_desc,
    b_desc,
    M,
    N,
    K: tl.constexpr,
    stride_am,
    stride_bk,
    stride_bn,
    BACKWARD: tl.constexpr,
    INTERPRETED: tl.constexpr,
    TMA: tl.constexpr,
    B_NK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    # a (M, K) row-major, b (K, N) by its strides; pre and out (M, N) row-major.
    # Forward: pre = round(a·b + bias), out = round(gelu(pre)).
    # Backward: out = round(round(a·b) · gelu'(pre)), pre read.
    # USE_TMA (a tile the autotuner may pick where TMA is possible): a's and b's tiles come
    # through tensor descriptors (Hopper's TMA unit, zeros past the edges), a_desc on a and
    # b_desc on b's storage: (N, K) where b is its transpose (B_NK), else (K, N). TMA: the
    # launch could make the descriptors (the autotuner's key: its TMA tiles only then).
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # GROUP_M row tiles walk the column tiles together, so b's tiles stay in L2.
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    group_size = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offsets = rows.to(tl.int64)  # rows × N passes 2**31 at 512 × 1024 tokens of large
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inner = tl.arange(0, BLOCK_K)
    a_at = a + offsets[:, None] * stride_am + inner[None, :]
    b_at = b + inner[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        if USE_TMA:
            a_tile = a_desc.load([pid_m * BLOCK_M, k])
            if B_NK:
                b_tile = b_desc.load([pid_n * BLOCK_N, k]).T
            else:
                b_tile = b_desc.load([k, pid_n * BLOCK_N])
        else:
            a_tile = tl.load(a_at, mask=(rows[:, None] < M) & (inner[None, :] < K - k), other=0.0)
            b_tile = tl.load(b_at, mask=(inner[:, None] < K - k) & (cols[None, :] < N), other=0.0)
        if INTERPRETED:  # the interpreter multiplies half-precision tiles wrongly
            a_tile = a_tile.to(tl.float32)
            b_tile = b_tile.to(tl.float32)
        acc = tl.dot(a_tile, b_tile, acc)
        a_at += BLOCK_K
        b_at += BLOCK_K * stride_bk
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    at = offsets[:, None] * N + cols[None, :]
    rsqrt2 = 0.7071067811865476
    dtype = out.dtype.element_ty
    if BACKWARD:
        grad = rounded(acc, dtype, INTERPRETED)
        x = tl.load(pre + at, mask=inside, other=0.0).to(tl.float32)
        cdf = 0.5 * (1.0 + tl.math.erf(x * rsqrt2))
        pdf = tl.exp(-0.5 * x * x) * 0.3989422804014327  # 1/sqrt(2 pi)
        result = grad * (cdf + x * pdf)
    else:
        acc += tl.load(bias + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
        x = rounded(acc, dtype, INTERPRETED)
        tl.store(pre + at, x.to(dtype), mask=inside)
        result = 0.5 * x * (1.0 + tl.math.erf(x * rsqrt2))
    tl.store(out + at, rounded(result, dtype, INTERPRETED).to(dtype), mask=inside)


def tile_descriptors(args: tuple, tile: dict) -> None:
    """The descriptors in `matmul_gelu_arguments`' `args` take `tile`'s block shapes."""
    _tile_descriptors({"a_desc": args[5], "b_desc": args[6], "B_NK": args[-1], **tile})


def _tile_descriptors(nargs: dict) -> None:
    """A TMA tile's pre-hook: the descriptors' block shapes are its tile's."""
    blocks = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [blocks[0], blocks[2]]
    b_block = [blocks[1], blocks[2]] if nargs["B_NK"] else [blocks[2], blocks[1]]
    nargs["b_desc"].block_shape = b_block


def tile_config(tile: tuple[int, ...], tma: bool) -> triton.Config:
    m, n, k, group, stages, warps = tile
    return triton.Config(
        {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": group, "USE_TMA": tma},
        num_stages=stages,
        num_warps=warps,
        pre_hook=_tile_descriptors if tma else None,
    )


def _where_tma(configs: list, nargs: dict, **kwargs: object) -> list:
    """The autotuner's tiles for a launch: the TMA ones only where it made descriptors."""
    return [config for config in configs if nargs["TMA"] or not config.kwargs["USE_TMA"]]


TUNED = triton.autotune(
    # Every tile through pointers, and the largest ones again through TMA (Hopper and newer).
    configs=[tile_config(tile, False) for tile in GPU_TILES]
    + [tile_config(tile, True) for tile in GPU_TILES if tile[2] == 64],
    key=["N", "K", "BACKWARD", "INTERPRETED", "TMA"],
    prune_configs_by={"early_config_prune": _where_tma},
    # The tuning kept in Triton's cache (the run directory's compile-cache under --compile),
    # so a requeued job does not tune again, where this Triton can (3.2 and later).
    **({"cache_results": True} if "cache_results" in _AUTOTUNE_OPTIONS else {}),
)(matmul_gelu)


def tma_possible(a: Tensor, b: Tensor) -> bool:
    """Whether a's and b's tiles may come through TMA descriptors: a GPU of compute
    capability 9.0 or newer (Hopper), this Triton's host descriptors, and `descriptors_fit`."""
    if TensorDescriptor is None or not a.is_cuda:
        return False
    return torch.cuda.get_device_capability(a.device) >= (9, 0) and descriptors_fit(a, b)


def descriptors_fit(*tensors: Tensor) -> bool:
    """Whether a TMA descriptor can describe each 2-D tensor: its start 16-byte aligned, its
    rows contiguous and a multiple of 16 bytes apart."""
    return all(
        tensor.data_ptr() % 16 == 0
        and tensor.stride(1) == 1
        and tensor.stride(0) * tensor.element_size() % 16 == 0
        for tensor in tensors
    )


def matmul_gelu_arguments(
    a: Tensor,
    b: Tensor,
    bias: Tensor,
    pre: Tensor,
    out: Tensor,
    *,
    b_strides: tuple[int, int],
    backward: bool,
    interpreted: bool,
    tma: bool,
) -> tuple:
    """`matmul_gelu`'s arguments up to B_NK (the tile's constants follow): a (M, K)
    row-major, b (K, N) by `b_strides` (b's storage: (N, K) row-major where stride 1 is
    along K, else (K, N)), into out (M, N); forward writes pre too, backward reads it (bias
    unused). `tma`: with the descriptors the TMA tiles take (`tma_possible`), their block
    shapes set by the tile chosen."""
    rows, inner = a.shape
    b_nk = b_strides[0] == 1
    descriptors = (None, None)
    if tma:
        placeholder = [16, 16]  # the tile's, set before each launch (_tile_descriptors)
        descriptors = tuple(TensorDescriptor.from_tensor(t, placeholder) for t in (a, b))
    return (
        a, b, bias, pre, out, *descriptors, rows, out.shape[1], inner, a.stride(0), *b_strides,
        backward, interpreted, tma, b_nk,
    )  # fmt: skip


def launch_matmul_gelu(*tensors: Tensor, b_strides: tuple[int, int], backward: bool) -> None:
    """The kernel on `matmul_gelu_arguments`' tensors (a, b, bias, pre, out). On a GPU the
    tile is tuned per (N, K), through TMA too where `tma_possible`."""
    a, b = tensors[:2]
    rows, columns = tensors[-1].shape
    gpu = a.is_cuda
    tma = tma_possible(a, b) if gpu else INTERPRETER_TMA
    args = matmul_gelu_arguments(
        *tensors, b_strides=b_strides, backward=backward, interpreted=not gpu, tma=tma
    )

    def grid(tile: dict) -> tuple[int]:
        return (triton.cdiv(rows, tile["BLOCK_M"]) * triton.cdiv(columns, tile["BLOCK_N"]),)

    if gpu:
        TUNED[grid](*args)
        return
    tile = {**INTERPRETER_TILE, "USE_TMA": tma}
    if tma:
        tile_descriptors(args, tile)
    matmul_gelu[grid(tile)](*args, **tile)


# --- dropout + residual + LayerNorm, a row per program ----------------------------------------


@triton.jit
def add_norm_forward(
    x,
    y,
    gamma,
    beta,
    out,
    h,
    mean,
    rstd,
    M,
    H,
    p,
    seed,
    eps,
    HAS_DROPOUT: tl.constexpr,
    INTERPRETED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    # BLOCK_M rows of H: h = x + dropout(y), rounded as the plain ops round (the dropout's
    # output to y's dtype, the sum to h's); out = LayerNorm(h), its statistics in fp32.
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    inside = (rows[:, None] < M) & (cols[None, :] < H)
    at = rows[:, None] * H + cols[None, :]
    residual = tl.load(x + at, mask=inside, other=0.0).to(tl.float32)
    branch = tl.load(y + at, mask=inside, other=0.0).to(tl.float32)
    if HAS_DROPOUT:  # the seed is read on the device: a CUDA graph's replay draws anew
        keep = tl.rand(tl.load(seed), at.to(tl.int32)) >= p  # offsets wrap past 2**31
        kept = rounded(branch * (1.0 / (1.0 - p)), y.dtype.element_ty, INTERPRETED)
        branch = tl.where(keep, kept, 0.0)
    total = rounded(residual + branch, h.dtype.element_ty, INTERPRETED)
    average = tl.sum(total, axis=1) / H
    centred = tl.where(inside, total - average[:, None], 0.0)
    inverse = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / H + eps)
    scale = tl.load(gamma + cols, mask=cols < H, other=0.0).to(tl.float32)
    shift = tl.load(beta + cols, mask=cols < H, other=0.0).to(tl.float32)
    normed = centred * inverse[:, None] * scale[None, :] + shift[None, :]
    tl.store(h + at, total.to(h.dtype.element_ty), mask=inside)
    normed = rounded(normed, out.dtype.element_ty, INTERPRETED)
    tl.store(out + at, normed.to(out.dtype.element_ty), mask=inside)
    tl.store(mean + rows, average, mask=rows < M)
    tl.store(rstd + rows, inverse, mask=rows < M)


@triton.jit
def add_norm_backward(
    grad,
    h,
    gamma,
    mean,
    rstd,
    dx,
    dy,
    dgamma,
    dbeta,
    M,
    H,
    p,
    seed,
    HAS_DROPOUT: tl.constexpr,
    INTERPRETED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,
    TILES: tl.constexpr,
):
    # TILES tiles of BLOCK_M rows per program: each row's input gradients (dx for the
    # residual, dy for the branch through its dropout, the mask drawn again from the seed),
    # and the program's partial sums of the LayerNorm's weight and bias gradients (summed by
    # the caller).
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    scale = tl.load(gamma + cols, mask=cols < H, other=0.0).to(tl.float32)
    weight_sum = tl.zeros((BLOCK_H,), dtype=tl.float32)
    bias_sum = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for tile in range(TILES):
        first = (pid * TILES + tile) * BLOCK_M
        rows = (first + tl.arange(0, BLOCK_M)).to(tl.int64)
        inside = (rows[:, None] < M) & (cols[None, :] < H)
        at = rows[:, None] * H + cols[None, :]
        upstream = tl.load(grad + at, mask=inside, other=0.0).to(tl.float32)
        total = tl.load(h + at, mask=inside, other=0.0).to(tl.float32)
        average = tl.load(mean + rows, mask=rows < M, other=0.0)
        inverse = tl.load(rstd + rows, mask=rows < M, other=0.0)
        normed = tl.where(inside, (total - average[:, None]) * inverse[:, None], 0.0)
        scaled = upstream * scale[None, :]
        mean_scaled = tl.sum(scaled, axis=1) / H
        mean_product = tl.sum(scaled * normed, axis=1) / H
        through = inverse[:, None] * (
            scaled - mean_scaled[:, None] - normed * mean_product[:, None]
        )
        weight_sum += tl.sum(upstream * normed, axis=0)
        bias_sum += tl.sum(upstream, axis=0)
        tl.store(dx + at, through.to(dx.dtype.element_ty), mask=inside)
        branch = rounded(through, dy.dtype.element_ty, INTERPRETED)  # the add's cast to y's dtype
        if HAS_DROPOUT:
            keep = tl.rand(tl.load(seed), at.to(tl.int32)) >= p
            kept = rounded(branch * (1.0 / (1.0 - p)), dy.dtype.element_ty, INTERPRETED)
            branch = tl.where(keep, kept, 0.0)
        tl.store(dy + at, branch.to(dy.dtype.element_ty), mask=inside)
    tl.store(dgamma + pid * H + cols, weight_sum, mask=cols < H)
    tl.store(dbeta + pid * H + cols, bias_sum, mask=cols < H)


# Rows per tile, and tiles per backward program: on a GPU a row per tile (a row of BERT's
# 768 or 1024 fills a program's warps), 16 rows per backward program (its partial sums);
# in the interpreter, whose cost is per program, 64 rows at once.
_GPU_ROWS, _GPU_TILES_PER_PROGRAM = 1, 16
_INTERPRETED_ROWS = 64


def _row_launch(gpu: bool, width: int) -> tuple[int, int, dict]:
    """(rows per tile, tiles per backward program, launch options) on a GPU or the
    interpreter."""
    if not gpu:
        return _INTERPRETED_ROWS, 1, {}
    warps = 4 if triton.next_power_of_2(width) <= 1024 else 8
    return _GPU_ROWS, _GPU_TILES_PER_PROGRAM, {"num_warps": warps}


def add_norm_forward_launch(
    x: Tensor,
    y: Tensor,
    gamma: Tensor,
    beta: Tensor,
    outputs: tuple[Tensor, Tensor, Tensor, Tensor],
    p: float,
    seed: Tensor,
    eps: float,
    *,
    gpu: bool,
) -> tuple[tuple[int], tuple, dict]:
    """(grid, arguments, launch options) of `add_norm_forward` on a GPU or the interpreter:
    outputs = (out, h, mean, rstd) for x, y (M, H) row-major."""
    rows, width = x.shape
    per_tile, _, options = _row_launch(gpu, width)
    args = (
        x, y, gamma, beta, *outputs, rows, width, p, seed, eps, p > 0, not gpu, per_tile,
        triton.next_power_of_2(width),
    )  # fmt: skip
    return (triton.cdiv(rows, per_tile),), args, options


def launch_add_norm_forward(*args) -> None:
    """`add_norm_forward` on `add_norm_forward_launch`'s arguments (x, y, gamma, beta,
    outputs, p, seed, eps): outputs = (out, h, mean, rstd) for x, y (M, H) row-major."""
    grid, kernel_args, options = add_norm_forward_launch(*args, gpu=args[0].is_cuda)
    add_norm_forward[grid](*kernel_args, **options)


def add_norm_backward_launch(
    grad: Tensor,
    saved: tuple[Tensor, Tensor, Tensor, Tensor],
    outputs: tuple[Tensor, Tensor],
    p: float,
    seed: Tensor,
    *,
    gpu: bool,
) -> tuple[tuple[int], tuple, dict, Tensor]:
    """(grid, arguments, launch options, partial sums) of `add_norm_backward` on a GPU or the
    interpreter: into outputs = (dx, dy), from grad (M, H) and saved = (h, gamma, mean,
    rstd); the partial sums of gamma's and beta's gradients, (2, programs, H) in fp32."""
    rows, width = grad.shape
    per_tile, tiles, options = _row_launch(gpu, width)
    programs = triton.cdiv(rows, per_tile * tiles)
    partial = grad.new_empty((2, programs, width), dtype=torch.float32)
    args = (
        grad, *saved, *outputs, partial[0], partial[1], rows, width, p, seed, p > 0, not gpu,
        per_tile, triton.next_power_of_2(width), tiles,
    )  # fmt: skip
    return (programs,), args, options, partial


def launch_add_norm_backward(*args) -> tuple[Tensor, Tensor]:
    """`add_norm_backward` on `add_norm_backward_launch`'s arguments (grad, saved, outputs,
    p, seed): into outputs = (dx, dy), from grad (M, H) and saved = (h, gamma, mean, rstd);
    returns the partial sums of gamma's and beta's gradients, (programs, H) each, in fp32."""
    grid, kernel_args, options, partial = add_norm_backward_launch(*args, gpu=args[0].is_cuda)
    add_norm_backward[grid](*kernel_args, **options)
    return partial[0], partial[1]
