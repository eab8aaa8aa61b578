"""How the encoder attends: the padded batch as collated, or only its real tokens
(`--unpad`), and the choice between them.

The padded path runs every layer on (B, L, H) and masks the padding keys in SDPA. The
unpadded path gathers the T real positions (attention_mask True) into (T, H) once, so the
embeddings' LayerNorm, every Linear, GELU and LayerNorm run on T rows, and scatters the
encoder's output back to (B, L, H) (zeros at padding, which nothing reads: the MLM slots
of padding carry IGNORE_INDEX, NSP reads [CLS]). Attention there is torch's
variable-length flash kernel (sequences delimited by `cu_seqlens`) where it runs: CUDA on
Ampere or newer, fp16/bf16; through `torch.nn.attention.varlen.varlen_attn` without
attention dropout, and through aten's flash op under it (`flash_varlen`) with dropout,
which varlen_attn does not pass on. Elsewhere each layer pads Q/K/V back to (B, L) for SDPA
and gathers the context again, which is the CPU's unpadded path (the tests').

Both paths compute the same function: a padded query's row never reaches a real one (its
key is masked), so the real positions' outputs and every gradient agree up to float
summation order (tests/test_model_levers.py). Under torch.compile the unpadded path is one
graph where the caller gives T (the trainer counts it on the host), else two graphs around
its read from the device (trainer/model.py `_unpadding`); T is dynamic either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer.choices import UNPAD_MODES

# torch's varlen kernel (torch 2.10 and later; None in an older torch, which attends padded
# everywhere), imported where a CUDA device asks for it (`_device_obstacle`, and the model
# where CUDA is available, before any compiled forward could trace it): the module loads
# torch._dynamo, seconds of every command's start that a run on the CPU has no use for.
varlen_attn: Callable[..., Tensor] | None = None
_VARLEN_LOOKED_UP = False


def look_up_varlen() -> Callable[..., Tensor] | None:
    """torch's varlen_attn, imported on the first call; None where this torch has none."""
    global varlen_attn, _VARLEN_LOOKED_UP
    if not _VARLEN_LOOKED_UP:
        _VARLEN_LOOKED_UP = True
        try:
            from torch.nn.attention.varlen import varlen_attn as kernel
        except ImportError:
            kernel = None
        varlen_attn = kernel
    return varlen_attn


# varlen_attn passes no dropout to the flash kernel under it, which takes one: with attention
# dropout the varlen path calls that kernel itself (`flash_varlen`), as torch's nested-tensor
# attention does. aten's op, differentiable (its backward regenerates the dropout mask from
# the returned RNG state) and traceable by torch.compile (it has a meta kernel).
_FLASH_FORWARD = getattr(torch.ops.aten, "_flash_attention_forward", None)

# The padding share from which auto unpads: below it, the gather and scatter of the tokens
# (and, in the runs that set it, a wait on the GPU for their count) cost about what the
# skipped rows save. Set from the two unpadded GPU runs measured at 512 (docs/benchmarks.md,
# "On a GPU": the synthetic batches' share, and the demo's pair shards' smaller one).
AUTO_MIN_PADDING = 0.08

# The attention paths `attention_path` picks.
PADDED = "padded"
VARLEN = "varlen"  # unpadded, torch's varlen flash kernel
UNPADDED = "unpadded"  # unpadded matmuls, padded SDPA per layer

# What torch's flash kernel takes: head sizes up to 256 in multiples of 8, half precision.
_FLASH_MAX_HEAD = 256
_FLASH_DTYPES = (torch.float16, torch.bfloat16)


def attention_path(unpad: str, varlen: bool, padding_share: Callable[[], float]) -> str:
    """PADDED, VARLEN or UNPADDED for `--unpad` (UNPAD_MODES), given whether the varlen
    kernel can run this forward (`varlen_usable`). `padding_share` (the batch's share of
    padding positions, a wait on the device for the mask's count) is asked only where the
    answer decides: auto with varlen."""
    if unpad not in UNPAD_MODES:
        raise ValueError(f"unpad {unpad!r}: one of {', '.join(UNPAD_MODES)}")
    if unpad == "off":
        return PADDED
    if unpad == "on":
        return VARLEN if varlen else UNPADDED
    return VARLEN if varlen and padding_share() >= AUTO_MIN_PADDING else PADDED


def padding_share(tokens: int, positions: int) -> float:
    """The share of a batch's `positions` (B·L) that are padding, `tokens` of them real."""
    return (positions - tokens) / positions


# Each device's reason torch's varlen kernel cannot run there (None where it can), found once.
# A plain dict, which torch.compile reads as it is (a functools.cache it traces through, with
# a warning that the cache is ignored).
_DEVICE_OBSTACLE: dict[torch.device, str | None] = {}


def _device_obstacle(device: torch.device) -> str | None:
    if device not in _DEVICE_OBSTACLE:
        found = None
        if device.type != "cuda" or not torch.cuda.is_available():
            found = f"torch has no varlen kernel for the {device.type} device"
        elif look_up_varlen() is None:
            found = f"torch {torch.__version__} has no torch.nn.attention.varlen (2.10 has)"
        else:
            found = before_ampere(device)
        _DEVICE_OBSTACLE[device] = found
    return _DEVICE_OBSTACLE[device]


def before_ampere(device: torch.device) -> str | None:
    """ "NAME is of compute capability X.Y, under 8.0" where the CUDA `device` is older than
    Ampere (V100, T4), which torch's flash kernels and Triton (bertkit's own kernels) do not
    support; None where it is not."""
    capability = torch.cuda.get_device_capability(device)
    if capability >= (8, 0):
        return None
    name = torch.cuda.get_device_name(device)
    return f"{name} is of compute capability {capability[0]}.{capability[1]}, under 8.0"


def varlen_available(device: torch.device) -> bool:
    """Whether torch's varlen flash kernel exists for `device`: this torch has it, and the
    device is a CUDA GPU of compute capability 8.0 (Ampere) or newer. On the CPU torch has
    no kernel (varlen_attn raises NotImplementedError)."""
    return _device_obstacle(device) is None


def varlen_obstacles(
    device: torch.device, dtype: torch.dtype, head_size: int, attention_dropout: float
) -> list[str]:
    """Why a forward may not attend through the varlen kernel, each reason a phrase; none
    where it may: the kernel exists on `device` (`varlen_available`), Q/K/V come in half
    precision (`dtype`: autocast's or the weights'), the head size is one flash takes, and
    where attention dropout is asked for (`attention_dropout`: 0 in evaluation), aten's
    flash op that takes it exists."""
    found = []
    if attention_dropout and _FLASH_FORWARD is None:
        found.append(
            f"torch {torch.__version__} has no flash kernel with attention dropout, and this "
            f"run's is {attention_dropout:g}"
        )
    if dtype not in _FLASH_DTYPES:
        found.append(f"it takes bf16 or fp16, and this run computes in {str(dtype)[6:]}")
    if head_size % 8 or head_size > _FLASH_MAX_HEAD:
        found.append(f"it takes head sizes in multiples of 8 up to 256, not {head_size}")
    if not varlen_available(device):
        found.append(str(_device_obstacle(device)))
    return found


def varlen_usable(
    device: torch.device, dtype: torch.dtype, head_size: int, attention_dropout: float
) -> bool:
    """Whether this forward may attend through the varlen kernel: `varlen_obstacles` finds
    nothing in the way."""
    return not varlen_obstacles(device, dtype, head_size, attention_dropout)


def describe_unpad(
    unpad: str,
    device: torch.device,
    dtype: torch.dtype,
    head_size: int,
    attention_dropout: float,
) -> str | None:
    """The line a run logs for `--unpad` (UNPAD_MODES) at its start: which path training's
    forwards take (the arguments as `varlen_obstacles` takes them); None for `off`, the
    padded batch, and for auto (the default) on a device without the varlen kernel, where it
    has no choice to make."""
    if unpad == "off":
        return None
    obstacles = varlen_obstacles(device, dtype, head_size, attention_dropout)
    why = "; ".join(obstacles)
    if unpad == "auto":
        if not varlen_available(device):
            return None
        if obstacles:
            return (
                "--unpad auto: training's forwards take the padded batch, since torch's varlen "
                f"kernel cannot run: {why} (evaluation, which has no dropout, may unpad)"
            )
        if attention_dropout:
            return (
                "--unpad auto: training's forwards take the padded batch: auto unpads only "
                f"without attention dropout, and this run's is {attention_dropout:g} (--unpad "
                "on attends through torch's flash varlen kernel with it; evaluation, which has "
                "no dropout, may unpad)"
            )
        return (
            f"--unpad auto: a batch of at least {AUTO_MIN_PADDING:.0%} padding runs the encoder "
            "on its real tokens only, attending through torch's varlen kernel"
        )
    if obstacles:
        return (
            "--unpad on: the matmuls run on the real tokens only, while every layer pads Q/K/V "
            f"back to the batch to attend, since torch's varlen kernel cannot run: {why}. "
            "On a GPU that path can be slower than the padded one (docs/gpu.md)"
        )
    with_dropout = f" with attention dropout {attention_dropout:g}" if attention_dropout else ""
    return (
        "--unpad on: the encoder runs on the real tokens only, attending through torch's varlen "
        f"kernel{with_dropout}"
    )


def padded_attention(qkv: Tensor, key_mask: Tensor, dropout: float) -> Tensor:
    """SDPA on the fused projection's output: qkv (B, L, 3, heads, d), key_mask (B, 1, 1, L)
    bool → context (B, L, heads·d).

    Q, K and V are strided views of `qkv` (each (B, heads, L, d), last dim contiguous, as
    the fused kernels take them): no copy forward, and backward stacks their gradients
    straight into the projection's (B, L, 3, heads, d) layout, one copy where a
    (3, B, heads, L, d) permute made two (the stack, then a reshape of the permuted grad).
    """
    batch, length, _, heads, size = qkv.shape
    query, key, value = (part.transpose(1, 2) for part in qkv.unbind(2))
    context = F.scaled_dot_product_attention(
        query, key, value, attn_mask=key_mask, dropout_p=dropout
    )
    # (B, heads, L, d) → (B, L, heads·d): a view where the kernel wrote (B, L, heads, d).
    return context.transpose(1, 2).reshape(batch, length, heads * size)


@dataclass(frozen=True)
class Unpadding:
    """Where a padded batch's T real tokens are: `index` (T,) into its B·L positions,
    row-major, so each sequence's tokens are contiguous and in order; `cu_seqlens` (B + 1,)
    int32 delimits them for the varlen kernel; `key_mask` (B, 1, 1, L) for the padded
    attention; `varlen` the path (VARLEN, or UNPADDED's per-layer padding)."""

    index: Tensor
    cu_seqlens: Tensor
    max_length: int
    batch: int
    length: int
    key_mask: Tensor
    varlen: bool

    @property
    def tokens(self) -> int:
        """T: the real tokens."""
        return int(self.index.shape[0])

    @property
    def padding_share(self) -> float:
        """The share of the batch's B·L positions that are padding."""
        return padding_share(self.tokens, self.batch * self.length)

    @classmethod
    def of(
        cls, attention_mask: Tensor, varlen: bool, counts: tuple[int, int] | None = None
    ) -> Unpadding:
        """The real positions of `attention_mask` (B, L), 1/True = a real token. `counts`:
        T and the longest sequence's length where the caller knows them (the trainer counts
        them on the host copy of the batch); else one wait on the device reads them."""
        mask = attention_mask.to(torch.bool)
        batch, length = mask.shape
        lengths = mask.sum(dim=1, dtype=torch.int32)
        tokens, longest = read_counts(lengths) if counts is None else counts
        # nonzero_static with T known: no wait for nonzero's output size.
        index = torch.nonzero_static(mask.reshape(-1), size=tokens).squeeze(1)
        cu_seqlens = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        return cls(index, cu_seqlens, longest, batch, length, mask[:, None, None, :], varlen)

    def positions(self) -> Tensor:
        """(T,) each real token's position in its sequence (the position embedding's id)."""
        return self.index % self.length

    def gather(self, padded: Tensor) -> Tensor:
        """(B, L, …) → (T, …): the real positions."""
        return padded.reshape(self.batch * self.length, *padded.shape[2:])[self.index]

    def scatter(self, tokens: Tensor) -> Tensor:
        """(T, …) → (B, L, …): back in place, zeros at padding."""
        rows = tokens.new_zeros(self.batch * self.length, *tokens.shape[1:])
        return rows.index_copy(0, self.index, tokens).view(self.batch, self.length, -1)

    def attention(self, qkv: Tensor, heads: int, dropout: float) -> Tensor:
        """qkv (T, 3·heads·d), the fused projection of the real tokens → context (T,
        heads·d): the varlen kernel, or SDPA on the batch padded back (UNPADDED)."""
        tokens, width = qkv.shape[0], qkv.shape[1] // 3
        size = width // heads
        if self.varlen:
            assert varlen_attn is not None  # varlen is chosen only where it exists
            query, key, value = qkv.view(tokens, 3, heads, size).unbind(1)  # (T, heads, d)
            cu, longest = self.cu_seqlens, self.max_length
            if torch.compiler.is_compiling():
                # The batch's length bounds every sequence's, and is fixed: the compiled graph
                # is not specialised on each batch's longest sequence.
                longest = self.length
            if dropout:
                context = flash_varlen(query, key, value, cu, longest, dropout)
            else:
                context = varlen_attn(query, key, value, cu, cu, longest, longest)
            return context.reshape(tokens, width)
        padded = self.scatter(qkv).view(self.batch, self.length, 3, heads, size)
        return self.gather(padded_attention(padded, self.key_mask, dropout))


def read_counts(lengths: Tensor) -> tuple[int, int]:
    """T and the longest of the sequences' `lengths` (B,), read from the device together:
    the wait an unpadded forward makes where its caller did not count them."""
    tokens, longest = torch.stack([lengths.sum(), lengths.max()]).tolist()
    return tokens, longest


def flash_varlen(
    query: Tensor, key: Tensor, value: Tensor, cu_seqlens: Tensor, longest: int, dropout: float
) -> Tensor:
    """(T, heads, d) each, sequences delimited by `cu_seqlens` → the context (T, heads, d),
    with `dropout` on the attention probabilities: aten's flash kernel, the one under
    varlen_attn, called with the dropout varlen_attn leaves out. Not causal, softmax scale
    1/sqrt(d)."""
    assert _FLASH_FORWARD is not None  # varlen_obstacles names its absence
    return _FLASH_FORWARD(
        query, key, value, cu_seqlens, cu_seqlens, longest, longest, dropout, False, False
    )[0]
