"""The trainer's optimizers and learning-rate schedule: AdamW or LAMB, warmup then decay.

BERT was pre-trained with Adam with decoupled weight decay (no decay on biases and LayerNorm)
and a linear warmup followed by linear decay; NVIDIA's large-batch recipe swaps in LAMB (You
et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes") and a
square-root decay. Both are built here from the same three pieces:

- `build_optimizer`: the two parameter groups (decay / no decay) and the optimizer by name;
- `Lamb`: a plain PyTorch LAMB (multi-tensor, `torch._foreach_*`), so no apex or CUDA
  extension is needed and it runs on CPU;
- `warmup_decay_schedule`: the per-step factor on the learning rate, as a `LambdaLR`.

Everything keeps to what `torch.optim` checkpoints hold (tensors and plain Python values), so
optimizer and scheduler state load with `torch.load(..., weights_only=True)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from trainer.choices import OPTIMIZERS

__all__ = ["OPTIMIZERS", "Lamb", "build_optimizer", "warmup_decay_schedule"]


_SPARSE_MESSAGE = (
    "Lamb does not support sparse gradients; build the embedding with "
    "nn.Embedding(..., sparse=False)"
)


class Lamb(Optimizer):
    """LAMB: Adam's direction, rescaled per parameter tensor by a trust ratio.

    For each parameter `w` with gradient `g` at step `t` (counted from 1):

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        update = (m / (1 - beta1**t)) / (sqrt(v / (1 - beta2**t)) + eps) + weight_decay * w
        trust = ||w|| / ||update||    (1.0 when either norm is 0)
        w = w - lr * trust * update

    This is Algorithm 2 of the paper with the identity scaling function, and the arithmetic
    of NVIDIA's FusedLAMB (bias correction on, eps outside the square root, the decay added
    to the update before the trust ratio). The trust ratio is 1.0 for a zero weight tensor
    (a freshly zero-initialised bias) so that it can move at all, and for a zero update.

    Two differences from apex's FusedLAMB as NVIDIA's BERT recipe runs it, both deliberate:
    - No built-in gradient clipping: FusedLAMB divides all gradients by their global norm
      when it exceeds `max_grad_norm`; here the trainer clips before `step()`, as for AdamW.
    - `always_adapt=True` (the paper) applies the trust ratio to every tensor; FusedLAMB's
      default (`use_nvlamb=False`) skips it for groups with `weight_decay == 0`, i.e. biases
      and LayerNorm. Pass `always_adapt=False` to match FusedLAMB.

    Multi-tensor: each step updates a parameter group's tensors together, one
    `torch._foreach_*` op per line of the formulas above (tensors of one device, dtype and
    step count at a time), with the same arithmetic, op for op, as a loop over the tensors.
    The norms are `torch._foreach_norm`, reduced in at least float32 (float64 parameters in
    float64); the trust ratios stay on the device, so a step never waits on the GPU. On
    BERT-base (158 tensors in two groups) a step went from 3,690 aten calls, ~23 small ops
    per tensor, to 53 (tests/test_lamb.py counts them). The price is memory: the update and
    its denominator exist for a whole group at once, up to twice the group's parameter size
    in transient buffers.
    A fused tensor that stands for several of the reference model's (bertkit's Q/K/V
    projection, `FUSED_PARTS`, found by the group's "param_names") gets a trust ratio for
    each of its row blocks, so the update equals LAMB's over separate Q, K and V tensors, as
    NVIDIA's and transformers' BERT hold them.
    (On CUDA the multiplication by the per-tensor trust ratios, 0-d tensors, takes foreach's
    per-tensor path inside ATen: no Python and no sync, but a kernel per tensor.)

    The step count lives in the state as a CPU float tensor per parameter, like
    `torch.optim.Adam`'s, so `state_dict()` holds only tensors and plain Python values; the
    state keys ("step", "exp_avg", "exp_avg_sq") are those of the per-tensor implementation,
    so its checkpoints load and resume. A parameter without a gradient does not step.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        always_adapt: bool = True,
    ) -> None:
        if lr < 0.0:
            raise ValueError(f"Lamb: lr must be >= 0, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Lamb: betas must each be in [0, 1), got {betas}")
        if eps <= 0.0:
            raise ValueError(f"Lamb: eps must be > 0 (it guards the division), got {eps}")
        if weight_decay < 0.0:
            raise ValueError(f"Lamb: weight_decay must be >= 0, got {weight_decay}")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "always_adapt": always_adapt,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One LAMB update of every parameter that has a gradient; returns closure's loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [param for param in group["params"] if param.grad is not None]
            if not params:
                continue
            parts = _fused_parts(group)
            grads = [param.grad for param in params]
            if any(grad.is_sparse for grad in grads):
                raise RuntimeError(_SPARSE_MESSAGE)
            steps = []
            for param in params:
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(
                        param, memory_format=torch.preserve_format
                    )
                steps.append(state["step"])
            torch._foreach_add_(steps, 1)
            # The step tensors stay on the CPU: one read for the group, and no GPU sync. The
            # counts agree unless some tensors skipped steps for want of a gradient (in this
            # run or before a checkpoint); each count then gets its own bias correction.
            counts = torch.stack(steps).tolist()
            buckets: dict[tuple[torch.device, torch.dtype, int], list[int]] = {}
            for index, (param, count) in enumerate(zip(params, counts, strict=True)):
                buckets.setdefault((param.device, param.dtype, int(count)), []).append(index)
            for (_, _, step), indices in buckets.items():
                bucket = [params[i] for i in indices]
                _lamb_update(
                    bucket,
                    [grads[i] for i in indices],
                    [self.state[param]["exp_avg"] for param in bucket],
                    [self.state[param]["exp_avg_sq"] for param in bucket],
                    step=step,
                    group=group,
                    parts=[parts.get(id(param), 1) for param in bucket],
                )
        return loss


# Tensors that stand for several of the reference model's (bertkit's fused Q/K/V
# projection: rows Q, K, V, each transformers' and NVIDIA's own tensor), by the end of their
# name: LAMB takes a trust ratio for each part, as over the separate tensors.
FUSED_PARTS = {"qkv.weight": 3, "qkv.bias": 3}


def _fused_parts(group: dict[str, Any]) -> dict[int, int]:
    """id(param) → its number of parts, for the group's fused tensors (by "param_names")."""
    parts = {}
    for param, name in zip(group["params"], group.get("param_names", ()), strict=False):
        for suffix, count in FUSED_PARTS.items():
            if name.endswith(suffix):
                parts[id(param)] = count
    return parts


def _pieces(tensors: list[torch.Tensor], parts: list[int]) -> list[torch.Tensor]:
    """Each tensor, or its `parts` equal row blocks (views), in order."""
    return [
        piece
        for tensor, count in zip(tensors, parts, strict=True)
        for piece in (tensor.chunk(count) if count > 1 else (tensor,))
    ]


def _lamb_update(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    step: int,
    group: dict[str, Any],
    parts: list[int] | None = None,
) -> None:
    """LAMB's update of tensors of one device and dtype at step `step` (see `Lamb`); a
    tensor of `parts` > 1 row blocks gets a trust ratio per block (FUSED_PARTS)."""
    beta1, beta2 = group["betas"]
    lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
    torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    denom = torch._foreach_div(exp_avg_sqs, bias_correction2)
    torch._foreach_sqrt_(denom)
    torch._foreach_add_(denom, eps)
    updates = torch._foreach_div(exp_avgs, bias_correction1)
    torch._foreach_div_(updates, denom)
    del denom
    if weight_decay != 0.0:
        torch._foreach_add_(updates, params, alpha=weight_decay)

    if group["always_adapt"] or weight_decay != 0.0:
        # Half-precision norms over millions of elements lose digits (and fp16 overflows),
        # so reduce in at least float32; float64 parameters keep float64.
        dtype = params[0].dtype
        norm_dtype = torch.promote_types(dtype, torch.float32)
        pieces = parts or [1] * len(params)
        weight_pieces, update_pieces = _pieces(params, pieces), _pieces(updates, pieces)
        weight_norms = torch.stack(torch._foreach_norm(weight_pieces, 2, dtype=norm_dtype))
        update_norms = torch.stack(torch._foreach_norm(update_pieces, 2, dtype=norm_dtype))
        # torch.where rather than `if`: keeps the ratios on the device (no sync).
        trust = torch.where(
            (weight_norms > 0) & (update_norms > 0),
            weight_norms / update_norms,
            torch.ones_like(weight_norms),
        )
        torch._foreach_mul_(update_pieces, (trust.to(dtype) * lr).unbind())
        torch._foreach_sub_(params, updates)
    else:
        torch._foreach_sub_(params, updates, alpha=lr)


def _parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay tensors with two or more dimensions; biases and LayerNorm scales (1-D) not.

    The rule is the dimension, not the name: Google's BERT excluded names containing
    "LayerNorm", "layer_norm" or "bias", which for BERT is exactly the 1-D tensors, but a
    name rule silently breaks when a module is renamed (`norm1`, `ln_f`), and decaying a
    scale or shift towards zero is never what is meant. Embedding and Linear weights (2-D)
    decay, as in Google's and NVIDIA's BERT.

    `named_parameters()` yields a tied tensor (the MLM decoder sharing the word embeddings)
    once, under its first name, so it is in one group once. Frozen tensors are left out.
    """
    decay: list[tuple[str, nn.Parameter]] = []
    no_decay: list[tuple[str, nn.Parameter]] = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (decay if param.ndim >= 2 else no_decay).append((name, param))
    groups = []
    for members, group_decay in ((decay, weight_decay), (no_decay, 0.0)):
        if members:
            # "param_names" is torch.optim's own key for names (kept in state_dict); set here
            # directly rather than by passing (name, tensor) pairs, which torch < 2.6 rejects.
            groups.append(
                {
                    "params": [param for _, param in members],
                    "param_names": [name for name, _ in members],
                    "weight_decay": group_decay,
                }
            )
    if not groups:
        raise ValueError("build_optimizer: the model has no trainable parameters")
    return groups


def build_optimizer(
    model: nn.Module,
    name: str,
    lr: float,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    fused: bool = False,
) -> Optimizer:
    """The optimizer `name` ("adamw" or "lamb") over `model`, in two parameter groups.

    Group 0 holds the tensors with two or more dimensions (Linear and Embedding weights) at
    `weight_decay`; group 1 the 1-D tensors (biases, LayerNorm weights) at 0.0 (see
    `_parameter_groups`). Each group carries its names under "param_names".

    `fused=True` selects `torch.optim.AdamW`'s fused kernel (the trainer asks for it on CUDA);
    LAMB has no fused implementation here, so the flag does not change it.
    eps defaults to 1e-6, BERT's value (torch's AdamW default is 1e-8).
    """
    groups = _parameter_groups(model, weight_decay)
    key = name.lower()
    if key == "adamw":
        # fused=None (not False) lets torch pick its foreach default when fusing is not asked.
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True if fused else None)
    if key == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")


class _WarmupDecay:
    """The schedule's factor as a callable object, not a closure.

    `LambdaLR.state_dict()` saves the `__dict__` of callable objects (and nothing for plain
    functions), so the schedule's settings travel with the checkpoint as plain numbers (a
    record of what the run used: a resume builds its schedule from its own flags).
    """

    def __init__(self, warmup_steps: int, total_steps: int, power: float) -> None:
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.power = power

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        decay_steps = self.total_steps - self.warmup_steps
        if decay_steps == 0:  # warmup ends training: nothing left to decay over
            return 0.0
        # Clamp before the power: a negative base to power 0.5 would be NaN past the end.
        remaining = max(0.0, 1.0 - (step - self.warmup_steps) / decay_steps)
        return remaining**self.power


def applied_lr(scheduler: LambdaLR) -> float:
    """The learning rate the last optimizer step trained at (group 0's): the schedule's
    value before its last `step()`, which moved it on to the next step's (`get_last_lr`)."""
    return scheduler.base_lrs[0] * scheduler.lr_lambdas[0](scheduler.last_epoch - 1)


def warmup_decay_schedule(
    optimizer: Optimizer,
    warmup_steps: int,
    total_steps: int,
    power: float = 1.0,
    *,
    step: int = 0,
    peak_lr: float | None = None,
) -> LambdaLR:
    """Linear warmup to the peak lr, then polynomial decay to zero at `total_steps`.

    The factor on each group's peak lr at scheduler step `s`:

        s / warmup_steps                                          for s < warmup_steps
        max(0, 1 - (s - warmup_steps) / (total - warmup)) ** power   otherwise

    power 1.0 is linear decay (Google's BERT); NVIDIA's LAMB recipe uses 0.5. The factor at
    step 0 is 0.0 (as in Google's BERT and HF's `get_linear_schedule_with_warmup`), so the
    first optimizer step, taken before the first `scheduler.step()`, does not move the
    weights (Adam's moments still take in that gradient). With warmup_steps=0 the factor
    starts at 1.0. Past total_steps the factor stays 0.0.

    The schedule is a function of the step and these settings only, never of saved state:
    a resume builds it afresh at the step it goes on from (`step`), with its own flags, so
    the lr of step s is the one a fresh run with those flags has at step s (as the
    transformers Trainer does). `peak_lr` sets every group's peak (a resumed optimizer's
    groups hold the old run's lr); without it, each group's lr is its peak.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if total_steps <= 0:
        raise ValueError(f"total_steps must be > 0, got {total_steps}")
    if warmup_steps > total_steps:
        raise ValueError(
            f"warmup_steps ({warmup_steps}) exceeds total_steps ({total_steps}); lower the "
            "warmup or raise the total"
        )
    if not (power > 0.0 and math.isfinite(power)):
        raise ValueError(f"power must be a positive number (1.0 = linear decay), got {power}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    for group in optimizer.param_groups:
        # "initial_lr" is where LambdaLR keeps the peak; set here, it replaces a loaded one.
        group["initial_lr"] = peak_lr if peak_lr is not None else group["lr"]
    # last_epoch = step - 1: LambdaLR's first step (in its constructor) lands on `step` and
    # sets each group's lr to peak × factor(step); -1 is a fresh schedule.
    scheduler = LambdaLR(
        optimizer, _WarmupDecay(warmup_steps, total_steps, power), last_epoch=step - 1
    )
    # LambdaLR also counts its own step() calls (1 after its constructor): a schedule built
    # at `step` counts as one that took those steps, so a resumed run's checkpoints hold the
    # same scheduler state as an uninterrupted run's, byte for byte.
    scheduler._step_count = step + 1
    return scheduler
