"""The Triton kernel of trainer/ffn_epilogue.py: a matmul whose epilogue adds the bias and
takes the GELU (forward), or multiplies by the GELU's derivative (backward). Imported only
where Triton is installed; TRITON_INTERPRET=1 before the import runs it in Triton's NumPy
interpreter, on the CPU (the tests).

    launch(a, b, bias, pre, out, b_strides=(b.stride(0), b.stride(1)), backward=False)
"""

from __future__ import annotations

import inspect

import triton
import triton.language as tl
from torch import Tensor

_AUTOTUNE_OPTIONS = inspect.signature(triton.autotune).parameters
# The interpreter's tile: small, so the tests' shapes span several tiles and a ragged edge.
INTERPRETER_TILE = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2}
# Tile shapes Triton's autotuner times on a GPU, (M, N, K, group, stages, warps): the
# shapes that serve bf16 products of this size well on Ampere and Hopper.
_GPU_TILES = (
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
    M,
    N,
    K: tl.constexpr,
    stride_am,
    stride_bk,
    stride_bn,
    BACKWARD: tl.constexpr,
    INTERPRETED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # a (M, K) row-major, b (K, N) by its strides; pre and out (M, N) row-major.
    # Forward: pre = round(a·b + bias), out = round(gelu(pre)).
    # Backward: out = round(round(a·b) · gelu'(pre)), pre read.
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


TUNED = triton.autotune(
    configs=[
        triton.Config(
            {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": group},
            num_stages=stages,
            num_warps=warps,
        )
        for m, n, k, group, stages, warps in _GPU_TILES
    ],
    key=["N", "K", "BACKWARD", "INTERPRETED"],
    # The tuning kept in Triton's cache (the run directory's compile-cache under --compile),
    # so a requeued job does not tune again, where this Triton can (3.2 and later).
    **({"cache_results": True} if "cache_results" in _AUTOTUNE_OPTIONS else {}),
)(matmul_gelu)


def launch(
    a: Tensor,
    b: Tensor,
    bias: Tensor,
    pre: Tensor,
    out: Tensor,
    *,
    b_strides: tuple[int, int],
    backward: bool,
) -> None:
    """The kernel on a (M, K) row-major, b (K, N) by `b_strides`, into out (M, N); forward
    writes pre too, backward reads it (bias unused). On a GPU the tile is tuned per (N, K)."""
    rows, inner = a.shape
    columns = out.shape[1]
    args = (a, b, bias, pre, out, rows, columns, inner, a.stride(0), *b_strides, backward)
    if a.is_cuda:

        def grid(tile: dict) -> tuple[int]:
            return (triton.cdiv(rows, tile["BLOCK_M"]) * triton.cdiv(columns, tile["BLOCK_N"]),)

        TUNED[grid](*args, False)
        return
    tile = INTERPRETER_TILE
    grid = (triton.cdiv(rows, tile["BLOCK_M"]) * triton.cdiv(columns, tile["BLOCK_N"]),)
    matmul_gelu[grid](*args, True, **tile)
