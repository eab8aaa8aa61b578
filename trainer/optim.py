"""The trainer's optimizers and learning-rate schedule: AdamW or LAMB, warmup then decay.

BERT was pre-trained with Adam with decoupled weight decay (no decay on biases and LayerNorm)
and a linear warmup followed by linear decay; NVIDIA's large-batch recipe swaps in LAMB (You
et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes") and a
square-root decay. Both are built here from the same three pieces:

- `build_optimizer`: the two parameter groups (decay / no decay) and the optimizer by name;
- `Lamb`: a plain PyTorch LAMB, so no apex or CUDA extension is needed and it runs on CPU;
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

__all__ = ["OPTIMIZERS", "Lamb", "build_optimizer", "warmup_decay_schedule"]

OPTIMIZERS = ("adamw", "lamb")


def _norm(tensor: torch.Tensor) -> torch.Tensor:
    # Half-precision norms over millions of elements lose digits (and fp16 overflows), so
    # reduce in at least float32; float64 parameters keep float64.
    dtype = torch.promote_types(tensor.dtype, torch.float32)
    return torch.linalg.vector_norm(tensor, dtype=dtype)


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

    The step count lives in the state as a CPU float tensor, like `torch.optim.Adam`'s, so
    `state_dict()` holds only tensors and plain Python values.
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
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            adapt = group["always_adapt"] or weight_decay != 0.0
            for param in group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError(
                        "Lamb does not support sparse gradients; build the embedding with "
                        "nn.Embedding(..., sparse=False)"
                    )
                state = self.state[param]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(
                        param, memory_format=torch.preserve_format
                    )
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                # The step tensor stays on the CPU, so reading it does not sync the GPU.
                step = int(state["step"].item())

                exp_avg.lerp_(grad, 1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                bias_correction1 = 1.0 - beta1**step
                bias_correction2 = 1.0 - beta2**step
                denom = (exp_avg_sq / bias_correction2).sqrt_().add_(eps)
                update = (exp_avg / bias_correction1).div_(denom)
                if weight_decay != 0.0:
                    update.add_(param, alpha=weight_decay)

                if adapt:
                    weight_norm, update_norm = _norm(param), _norm(update)
                    # torch.where rather than `if`: keeps the ratio on the device (no sync).
                    trust = torch.where(
                        (weight_norm > 0) & (update_norm > 0),
                        weight_norm / update_norm,
                        torch.ones_like(weight_norm),
                    )
                    param.sub_(update.mul_(trust.to(update.dtype) * lr))
                else:
                    param.sub_(update, alpha=lr)
        return loss


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
    functions), so the schedule's settings travel with the checkpoint as plain numbers.
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


def warmup_decay_schedule(
    optimizer: Optimizer, warmup_steps: int, total_steps: int, power: float = 1.0
) -> LambdaLR:
    """Linear warmup to the optimizer's lr, then polynomial decay to zero at `total_steps`.

    The factor on each group's lr at scheduler step `s`:

        s / warmup_steps                                          for s < warmup_steps
        max(0, 1 - (s - warmup_steps) / (total - warmup)) ** power   otherwise

    power 1.0 is linear decay (Google's BERT); NVIDIA's LAMB recipe uses 0.5. The factor at
    step 0 is 0.0 (as in Google's BERT and HF's `get_linear_schedule_with_warmup`), so the
    first optimizer step, taken before the first `scheduler.step()`, does not move the
    weights (Adam's moments still take in that gradient). With warmup_steps=0 the factor
    starts at 1.0. Past total_steps the factor stays 0.0.
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
    return LambdaLR(optimizer, _WarmupDecay(warmup_steps, total_steps, power))
