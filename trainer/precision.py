"""The training step's number format (--precision): which one a run takes on its device,
the autocast that runs it, and fp16's dynamic loss scaling.

- fp32: no autocast (CPU runs with `auto`).
- bf16: `torch.autocast(dtype=torch.bfloat16)`; `auto` on a GPU with bf16 (Ampere and newer).
- fp16: `torch.autocast(dtype=torch.float16)` plus `torch.amp.GradScaler`; `auto` on a GPU
  without bf16 (V100, T4). fp16 keeps 5 exponent bits: small gradients underflow to 0 and
  large ones overflow to inf, so the loss is multiplied by a scale before backward and the
  gradients divided by it before clipping (`LossScaler`). A step whose gradients hold an
  inf or NaN is skipped (no weight or moment changes) and the scale halved; after 2,000
  clean steps it is doubled (torch's defaults, those of NVIDIA's apex and transformers).

A skipped step is still a step: the step count, the data position and the learning-rate
schedule advance past it (as transformers' Trainer does), so the schedule stays a function
of the step and a resume rebuilds it exactly (trainer/setup.py). The scaler's state (scale,
growth tracker) is in an fp16 run's checkpoints and restored by --resume.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any

import torch

from schemas.checkpoint import CheckpointKey, KernelsKey

_LOG = logging.getLogger("bertkit.train")

# The loss scale an fp16 run starts from (torch's default). A module constant so that a test
# can start one high enough to overflow on its first step.
INITIAL_SCALE = 2.0**16


def bf16_supported(device: torch.device) -> bool:
    """Whether `device` computes in bf16 natively. CUDA: compute capability 8.0 and up; torch's
    own check counts emulation as support by default, which on a V100 or T4 is a slow path."""
    if device.type != "cuda":
        return True  # the CPU's autocast takes bf16 (what --precision bf16 did before fp16)
    return torch.cuda.is_bf16_supported(including_emulation=False)


def resolve_precision(flag: str, device: torch.device, main: bool = True) -> str:
    """The precision a run uses, "bf16", "fp16" or "fp32", from --precision on `device`:
    `auto` is bf16 on a GPU with bf16, fp16 on one without, fp32 on the CPU (on a GPU, the
    `main` process logs which and why). An explicit bf16 on a GPU without it is refused."""
    if flag == "auto":
        if device.type != "cuda":
            return "fp32"
        name = torch.cuda.get_device_name(device)
        if bf16_supported(device):
            if main:
                _LOG.info("--precision auto: bf16 (%s computes in bf16)", name)
            return "bf16"
        if main:
            _LOG.info(
                "--precision auto: fp16 with dynamic loss scaling (%s has no bf16; pass "
                "--precision fp32 to train without either)",
                name,
            )
        return "fp16"
    if flag == "bf16" and not bf16_supported(device):
        raise ValueError(
            f"--precision bf16: {torch.cuda.get_device_name(device)} has no bf16 (it needs "
            "compute capability 8.0, Ampere or newer): pass --precision fp16 (or auto)"
        )
    return flag


# What the matrix products compute in, per resolved precision (fp32: the weights' own).
COMPUTE_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def autocast_for(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context the forward pass runs in: autocast to bf16 or fp16, or nothing (fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=COMPUTE_DTYPE[precision])


class LossScaler:
    """fp16's dynamic loss scaling for the trainer's step: `torch.amp.GradScaler`, and which
    steps it skipped, kept on the device until a metrics row reads them.

    The step calls `backward(loss)` per micro-batch, `unscale(optimizer)` before clipping,
    `step(optimizer, scheduler)` in place of the two steps. With AdamW's fused kernel the skip
    happens inside the kernel (GradScaler hands it the overflow flag), so the step never
    waits for the GPU; LAMB has no such kernel, and GradScaler reads the flag on the host
    once per step.
    """

    def __init__(self, device: torch.device) -> None:
        self.scaler = torch.amp.GradScaler(device.type, init_scale=INITIAL_SCALE)
        # One flag per step since the last metrics row: True where the step was skipped.
        self._skipped: list[torch.Tensor] = []
        self._first_schedule_step = True

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """The gradients divided by the scale (in place), so clipping sees their true norm."""
        self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer, scheduler: Any) -> None:
        """The optimizer's step unless a gradient overflowed, the scale's update, and the
        schedule's step, skipped or not (module docstring)."""
        self.scaler.step(optimizer)
        # A skipped step is the one whose update lowers the scale (halved on an overflow,
        # kept or doubled otherwise). Compared on the device: GradScaler's public
        # get_scale() reads the value to the host, which would make every step wait.
        before = self.scaler._scale.clone()  # type: ignore[union-attr]
        self.scaler.update()
        self._skipped.append(self.scaler._scale < before)  # type: ignore[operator]
        if not self._first_schedule_step:
            scheduler.step()
            return
        # A schedule's first step warns when no optimizer step came before it, as after a
        # skipped first step with LAMB (fused AdamW is called, and skips in its kernel).
        # Here that order is by design; torch looks at the first step only.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step")
            scheduler.step()
        self._first_schedule_step = False

    def row(self, step: int) -> tuple[dict[str, Any], list[int]]:
        """A metrics row's fields for the steps up to `step` since the last row: the loss
        scale the next step uses and how many steps were skipped; and those steps' numbers.
        Reads the flags to the host (the row reads its sums there too), then forgets them."""
        flags = torch.stack(self._skipped).tolist() if self._skipped else []
        first = step - len(flags) + 1
        skipped = [first + i for i, flag in enumerate(flags) if flag]
        self._skipped.clear()
        return {"loss_scale": self.scaler.get_scale(), "skipped_steps": len(skipped)}, skipped

    def state_dict(self) -> dict[str, Any]:
        """The scale, growth tracker and settings: floats and ints, for the checkpoint."""
        return self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scaler.load_state_dict(state)


def loss_scaler(precision: str, device: torch.device) -> LossScaler | None:
    """The run's loss scaler: fp16's, or None (bf16 and fp32 need none)."""
    return LossScaler(device) if precision == "fp16" else None


def check_resume_precision(resumed: dict[str, Any], precision: str, flag: str, where: str) -> None:
    """A resume of an fp16 run goes on in fp16 (its checkpoint holds the loss scale; in
    another precision the losses would not be an uninterrupted run's); a bf16 or fp32 run
    may go on in fp16 (on a GPU without bf16), its loss scale starting afresh."""
    fp16_run = CheckpointKey.GRAD_SCALER in resumed
    if fp16_run and precision != "fp16":
        shown = f"{flag}, so {precision} here" if flag == "auto" else precision
        raise ValueError(
            f"--resume: {where} is an fp16 run (its loss scale is in the checkpoint), "
            f"--precision is {shown}: pass --precision fp16"
        )
    if not fp16_run and precision == "fp16":
        _LOG.info(
            "--resume: %s was not trained in fp16; its fp16 loss scale starts at %g",
            where,
            INITIAL_SCALE,
        )


def recorded_precision(checkpoint: dict[str, Any]) -> str | None:
    """The precision a checkpoint's run trained in, as resolved on its device: fp16 where the
    checkpoint holds a loss scale; else its --precision, bf16 or fp32; for `auto`, fp32 on
    the CPU and bf16 on a GPU (a GPU without bf16 took fp16, which holds a loss scale), by
    the device its kernels record names. None where nothing says (a checkpoint from before
    that record)."""
    if CheckpointKey.GRAD_SCALER in checkpoint:
        return "fp16"
    flag = checkpoint[CheckpointKey.TRAIN_CONFIG].get("precision")
    if flag != "auto":
        return flag
    device = (checkpoint.get(CheckpointKey.KERNELS) or {}).get(KernelsKey.DEVICE)
    if device is None:
        return None
    return "fp32" if device == "cpu" else "bf16"


def precision_change(checkpoint: dict[str, Any], precision: str, flag: str) -> str | None:
    """--resume's phrase for a run that goes on in another precision than the checkpoint's
    run trained in (`precision`: this run's, resolved from `flag`): `--precision fp32 →
    bf16`; where the checkpoint does not say which `auto` took, the flags compared. None
    where nothing changed."""
    was = recorded_precision(checkpoint)
    if was is None:
        saved = checkpoint[CheckpointKey.TRAIN_CONFIG].get("precision")
        if saved is None or saved == flag:
            return None
        was = saved
    return None if was == precision else f"--precision {was} → {precision}"
