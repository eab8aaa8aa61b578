"""Rank-aware helpers, in one place: who am I, which device, and the few collectives used.

`torchrun` (or any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) starts
one process per GPU, on one node or many; a plain `python -m trainer.train` is world size 1
and needs no process group. NCCL on CUDA, Gloo on CPU (the tests run 2 Gloo processes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True, slots=True)
class Distributed:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def setup(device: str = "auto") -> Distributed:
    """Join the process group that the launcher's environment describes, if any."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    if use_cuda:
        check_cuda(local_rank)
        torch.cuda.set_device(local_rank)
        chosen = torch.device("cuda", local_rank)
    else:
        chosen = torch.device("cpu")
    global _CONTROL_GROUP  # one per process, made with the default group
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
        # Small CPU-side agreements (agree_max) go through Gloo: on NCCL they would need a
        # device tensor and a GPU synchronisation every step.
        _CONTROL_GROUP = dist.new_group(backend="gloo") if use_cuda else None
    return Distributed(rank, world_size, local_rank, chosen)


# Where a user on a GPU machine reads how to install a CUDA torch and check it is used.
GPU_DOCS = "docs/gpu.md#install-on-a-gpu-machine"


class DeviceError(ValueError):
    """--device cuda where this torch cannot use a GPU: a refusal before any work (exit 2)."""


def check_cuda(local_rank: int = 0) -> None:
    """Refuse --device cuda in one line where torch cannot give this process a GPU: a
    CPU-only build (torch would fail later with `module 'torch._C' has no attribute
    '_cuda_setDevice'`), a CUDA build that sees no GPU, or fewer GPUs than LOCAL_RANK needs."""
    if torch.version.cuda is None and torch.version.hip is None:
        raise DeviceError(
            f"--device cuda: this torch is a CPU-only build (torch {torch.__version__}); "
            f"install a CUDA build: see {GPU_DOCS}"
        )
    if not torch.cuda.is_available():
        raise DeviceError(
            f"--device cuda: this torch (torch {torch.__version__}, CUDA "
            f"{torch.version.cuda or torch.version.hip}) sees no GPU: check `nvidia-smi` and "
            f"CUDA_VISIBLE_DEVICES, or pass --device cpu; see {GPU_DOCS}"
        )
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise DeviceError(
            f"--device cuda: LOCAL_RANK {local_rank}, but this machine shows {count} GPU"
            f"{'' if count == 1 else 's'}: start at most {count} processes a node "
            f"(torchrun --nproc-per-node {count})"
        )


_CONTROL_GROUP: Any = None  # the Gloo group beside NCCL's, or None (the default group is Gloo)


def teardown(env: Distributed) -> None:
    global _CONTROL_GROUP  # destroyed with the default group
    if env.active and dist.is_initialized():
        dist.destroy_process_group()
        _CONTROL_GROUP = None


def all_reduce_sum(env: Distributed, values: torch.Tensor) -> torch.Tensor:
    """Sum a small float64 tensor over ranks (a no-op in a single process)."""
    if env.active:
        values = values.to(env.device)
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values.cpu()


def agree_max(env: Distributed, value: int) -> int:
    """The largest of every rank's `value`, known to all (a CPU all-reduce)."""
    if not env.active:
        return value
    tensor = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=_CONTROL_GROUP)
    return int(tensor.item())


def gather_tensors(env: Distributed, tensor: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's copy of a same-shaped tensor (on rank order); used for RNG states."""
    if not env.active:
        return [tensor]
    moved = tensor.to(env.device)
    parts = [torch.empty_like(moved) for _ in range(env.world_size)]
    dist.all_gather(parts, moved)
    return [part.cpu() for part in parts]


def barrier(env: Distributed) -> None:
    if env.active:
        dist.barrier()


def _device_module(device: torch.device) -> Any | None:
    """torch.cuda, torch.xpu, torch.mps…: the generator API of `device`'s type; None on CPU."""
    return None if device.type == "cpu" else torch.get_device_module(device.type)


def rng_state(env: Distributed) -> dict[str, Any]:
    """Every rank's generator states (dropout draws differ per rank), gathered on all: the
    CPU's, and the accelerator's whatever its type (CUDA, XPU, MPS), under "device" with
    its type beside it ("cuda" too, as checkpoints before this field had it)."""
    cpu = gather_tensors(env, torch.get_rng_state())
    module = _device_module(env.device)
    device = gather_tensors(env, module.get_rng_state()) if module is not None else None
    state: dict[str, Any] = {"torch": cpu, "device_type": env.device.type, "device": device}
    state["cuda"] = device if env.device.type == "cuda" else None
    return state


def restore_rng(env: Distributed, state: dict[str, Any]) -> None:
    """Set this rank's generators from `state`: the CPU's always, the accelerator's when
    the checkpoint was written on the same device type."""
    torch.set_rng_state(state["torch"][env.rank])
    module = _device_module(env.device)
    saved_type = state.get("device_type", "cuda" if state.get("cuda") else "cpu")
    device = state.get("device") or state.get("cuda")
    if module is not None and saved_type == env.device.type and device:
        module.set_rng_state(device[env.rank])
