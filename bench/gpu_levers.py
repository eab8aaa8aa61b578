"""bench.train_step's switches that change how the step runs: the number format (bf16 or
fp16 autocast, fp16's loss scaling), where the batches wait (on the device, or in pinned or
pageable host memory and copied inside the timed step, as the trainer's loop copies them)
and a profile of the step's kernels. Not a command: `python -m bench.train_step
--precision … --host-batches … --profile N` uses these (--compile-mode: the trainer's own
trainer/compiling.py `compiled`).

    autocast, scaler = precision_step("fp16", device)   # scaler: None unless fp16
    optimizer_step(loss, model, optimizer, scaler)      # backward, clip, step, zero_grad
    fetch = batch_source(inputs, "pinned", device)      # fetch(i): batch i on the device
    kernels = profile_steps(step, 3, 0, device)         # the top kernels by device time
"""

from __future__ import annotations

# First: without the train extra, one line naming the install command (bench/train_extra.py).
import bench.train_extra  # noqa: F401

# isort: split
import contextlib
from collections.abc import Callable
from typing import Any

import torch

from trainer.collate import to_device  # the trainer's host-to-device copy (non_blocking)
from trainer.precision import INITIAL_SCALE, autocast_for  # the trainer's autocast and scale

HOST_BATCHES = ("device", "pinned", "pageable")
PROFILE_TOP = 25  # kernels listed per profiled row
CLIP_GRAD_NORM = 1.0  # the trainer's default


def precision_step(
    dtype: str, device: torch.device
) -> tuple[contextlib.AbstractContextManager, torch.amp.GradScaler | None]:
    """The forward's autocast for `dtype` ("bf16", "fp16" or "fp32": none), and for fp16
    the loss scaler `bertkit train --precision fp16` steps with (dynamic scaling)."""
    scaler = None
    if dtype == "fp16":
        scaler = torch.amp.GradScaler(device.type, init_scale=INITIAL_SCALE)
    return autocast_for(dtype, device), scaler


def optimizer_step(
    loss: torch.Tensor,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
) -> None:
    """Backward, clipping at 1.0, the optimizer's step, zero_grad: the trainer's step. With
    a scaler the loss is scaled and the gradients unscaled before clipping; the scaler's
    inf check and skip, and its update, are in the step too (all of it timed)."""
    if scaler is None:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_GRAD_NORM)
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_GRAD_NORM)
        scaler.step(optimizer)
        scaler.update()
    optimizer.zero_grad(set_to_none=True)


def batch_source(
    inputs: list[dict[str, torch.Tensor]], where: str, device: torch.device
) -> Callable[[int], dict[str, torch.Tensor]]:
    """fetch(i) gives batch i (cycled) on `device`. "device": copied once, up front, so no
    copy is timed; "pinned" / "pageable": kept in host memory of that kind and copied with
    the trainer's to_device (non_blocking) in every step."""
    if where == "device" or device.type != "cuda":
        on_device = [to_device(b, device, None) for b in inputs]
        return lambda index: on_device[index % len(on_device)]
    if where == "pinned":
        inputs = [{name: t.pin_memory() for name, t in b.items()} for b in inputs]
    return lambda index: to_device(inputs[index % len(inputs)], device, None)


def profile_steps(
    step: Callable[[int], None], steps: int, first: int, device: torch.device
) -> list[dict[str, Any]]:
    """Run `steps` steps under torch.profiler; the kernels that took the most device time,
    each with its share of the profiled device time (kernels only). A profiler that fails
    leaves the row's timings standing: its error is the one entry."""
    try:
        return _profile(step, steps, first, device)
    except (RuntimeError, AttributeError) as error:
        return [{"name": f"profile failed: {type(error).__name__}: {error}", "share": 0.0}]


def _profile(
    step: Callable[[int], None], steps: int, first: int, device: torch.device
) -> list[dict[str, Any]]:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        for index in range(first, first + steps):
            step(index)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    # Kernels only: a record_function range (Optimizer.step#…) also shows on the device
    # timeline as a user annotation spanning its kernels, which would count them twice.
    kernels = [
        event
        for event in profiler.key_averages()
        if event.device_type == torch.autograd.DeviceType.CUDA
        and event.self_device_time_total
        and not getattr(event, "is_user_annotation", False)
        and "#" not in event.key
    ]
    if not kernels:  # a CPU run: the operators' own CPU time instead
        kernels = [e for e in profiler.key_averages() if e.self_cpu_time_total]
        total = sum(e.self_cpu_time_total for e in kernels)
        key = "self_cpu_time_total"
    else:
        total = sum(e.self_device_time_total for e in kernels)
        key = "self_device_time_total"
    kernels.sort(key=lambda e: getattr(e, key), reverse=True)
    return [
        {
            "name": event.key,
            "calls_per_step": event.count / steps,
            "ms_per_step": getattr(event, key) / 1000 / steps,
            "share": getattr(event, key) / total if total else 0.0,
        }
        for event in kernels[:PROFILE_TOP]
    ]


def print_profile(title: str, kernels: list[dict[str, Any]]) -> None:
    print(f"profile of {title}: top {len(kernels)} kernels by device time per step")
    for k in kernels:
        if "ms_per_step" not in k:
            print(f"  {k['name']}")
            continue
        print(
            f"  {k['ms_per_step']:8.3f} ms {k['share']:6.1%} {k['calls_per_step']:6.1f}× "
            f"{k['name'][:110]}"
        )
