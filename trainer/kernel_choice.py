"""Where bertkit's own Triton kernels run, and auto's choice of them: each is timed against
the plain ops it replaces on the run's own shape at the start, on the device, and checked
against them there; it is taken only where it ran faster and gave their results.

    lever = KernelLever("--ffn-epilogue", "the epilogue kernels", "the plain block", "…")
    use, line = lever.choose("auto", device, obstacles, timing, agree, "32,768 rows")

The levers: trainer/ffn_epilogue.py (`--ffn-epilogue`) and trainer/add_norm.py
(`--add-norm`); the kernels: trainer/triton_kernels.py, imported at first use (`kernels`).
"""

from __future__ import annotations

import functools
import importlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from pipelines.io.extras import installed
from trainer.attention import before_ampere

_WARMUP_STEPS = 3  # Triton's tuning and compilation, cuBLAS's heuristics, inductor's graph
_TIMED_STEPS = 10
# Off a GPU the kernels run in Triton's interpreter, far slower than the plain ops: no
# timing there is a figure, so one run of each kind checks that everything runs.
_STEPS_OFF_GPU = (1, 1)
# A kernel's results may differ from the plain ops' by this many roundings of the run's
# dtype, relative to the largest value (the products' sums run in another order).
_ROUNDINGS = 8

# One forward and backward of a block on fixed inputs, returning what is compared: its
# output and its inputs' gradients.
Run = Callable[[], Sequence[Tensor]]


def triton_available() -> bool:
    """Whether Triton can be imported (torch's CUDA wheels bring it; its CPU wheel does not)."""
    return installed("triton")


@functools.cache
def kernels() -> Any:
    """trainer/triton_kernels.py, imported at first use: Triton is optional, and its
    interpreter is chosen (TRITON_INTERPRET) when Triton is imported."""
    return importlib.import_module("trainer.triton_kernels")


def gpu_obstacles(device: torch.device) -> list[str]:
    """Why a Triton kernel cannot run on `device`, each a phrase; none where it can."""
    if device.type != "cuda":
        return [f"they run on a CUDA GPU, and this run is on {device.type}"]
    if not triton_available():
        return ["this torch has no Triton (torch's CUDA wheels bring it)"]
    # Before Ampere, Triton's matmul has no tensor cores (python -m bench.kernel_codegen).
    older = before_ampere(device)
    return [f"{older}, the oldest Triton supports"] if older else []


def time_and_check(
    plain: Run,
    kernel: Run,
    dtype: torch.dtype,
    kernels_name: str,
    checks: tuple[Run, Run] | None = None,
) -> tuple[float, float, str | None]:
    """Median milliseconds of `plain` and of `kernel` (on a CUDA device), after warm-up, and
    why the kernel may not be used there (then its time is inf): it failed, or what it
    returned differed from what `plain` returned by more than a few roundings of `dtype`.
    `checks`: the pair of runs compared instead, where the timed ones draw random numbers
    (dropout) that differ between the two."""
    times, results = [], []
    for index, run in enumerate((plain, kernel)):
        try:
            returned = run()
            on_gpu = returned[0].is_cuda
            for _ in range(_steps(on_gpu)[0] - 1):
                returned = run()
            if checks is not None:
                returned = checks[index]()
            results.append([tensor.detach().float() for tensor in returned])
            median = timed_ms(run, on_gpu)
        except Exception as error:  # the kernel's failure on this GPU: the plain ops
            if run is plain:
                raise
            first = str(error).splitlines()[0] if str(error) else ""
            return times[0], math.inf, f"{kernels_name} failed ({type(error).__name__}: {first})"
        times.append(median)
    return times[0], times[1], disagreement(results[0], results[1], dtype, kernels_name)


def _steps(on_gpu: bool) -> tuple[int, int]:
    """How many warm-up and timed runs a timing takes."""
    return (_WARMUP_STEPS, _TIMED_STEPS) if on_gpu else _STEPS_OFF_GPU


def warmed_ms(run: Run, on_gpu: bool) -> float:
    """`run`'s median milliseconds after the warm-up runs (`timed_ms`)."""
    for _ in range(_steps(on_gpu)[0]):
        run()
    return timed_ms(run, on_gpu)


def timed_ms(run: Run, on_gpu: bool) -> float:
    """The median milliseconds of `run` over the timed runs, warmed up already."""
    return statistics.median(_elapsed_ms(run, on_gpu) for _ in range(_steps(on_gpu)[1]))


def _elapsed_ms(run: Run, on_gpu: bool) -> float:
    """One run's milliseconds: on the GPU between CUDA events, elsewhere (Triton's
    interpreter, bench/kernels.py's CPU check) on the host's clock."""
    if not on_gpu:
        began = time.perf_counter()
        run()
        return 1000 * (time.perf_counter() - began)
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def disagreement(
    plain: Sequence[Tensor], kernel: Sequence[Tensor], dtype: torch.dtype, kernels_name: str
) -> str | None:
    """Why the kernel's results (output, then the inputs' gradients) are not the plain
    ops', or None where each is within a few roundings of `dtype`."""
    rounding = torch.finfo(dtype).eps
    for index, (want, got) in enumerate(zip(plain, kernel, strict=True)):
        scale = want.abs().max().item()
        difference = (got - want).abs().max().item()
        if not difference <= _ROUNDINGS * rounding * scale:  # NaN included
            name = "output" if index == 0 else f"gradient {index}"
            return (
                f"{kernels_name}' {name} differed from the plain ops' on this GPU (by "
                f"{difference:.3g}, the largest value {scale:.3g})"
            )
    return None


@dataclass(frozen=True)
class KernelLever:
    """A `bertkit train` flag (auto, on, off) between a Triton kernel and the plain ops."""

    flag: str  # "--ffn-epilogue"
    kernels: str  # "the epilogue kernels": they run, fail, cannot run
    plain: str  # "the plain feed-forward block": what runs without them
    taken: str  # what the run does with them, as its line says it

    def choose(
        self,
        mode: str,
        device: torch.device,
        obstacles: list[str],
        timing: Callable[[], tuple[float, float, str | None]],
        agree: Callable[[Tensor], Tensor],
        shape: str,
        earlier: bool | None = None,
    ) -> tuple[bool, str | None]:
        """Whether the run takes the kernels under `mode`, and the line its start logs (None:
        nothing to say). auto calls `timing` (plain ms, kernel ms, why not), `agree` sums
        the two timings over a job's ranks, so all decide alike; `shape`: what was timed.
        `earlier`: what auto chose at the run's start on this kind of GPU, where a resume
        found it in the checkpoint: taken again untimed, so the run goes on as it began."""
        if mode == "off":
            return False, None
        if obstacles:
            if mode == "auto" and device.type != "cuda":
                return False, None  # a CPU run: no choice to make, nothing to say
            why = "; ".join(obstacles)
            return (
                False,
                f"{self.flag} {mode}: {self.plain}, since {self.kernels} cannot run: {why}",
            )
        if mode == "on":
            return True, f"{self.flag} on: {self.taken}"
        if earlier is not None:
            chosen = self.taken if earlier else self.plain
            return (
                earlier,
                f"{self.flag} auto: {chosen}, as at the run's start (its checkpoint's record)",
            )
        plain, kernel, problem = timing()
        kernel = math.inf if problem else kernel  # every rank then takes the plain ops
        plain, kernel = agree(torch.tensor([plain, kernel], dtype=torch.float64)).tolist()
        if math.isinf(kernel):  # here (the reason) or on another rank of the job
            why = problem or f"{self.kernels} failed or disagreed on another rank of the job"
            return False, f"{self.flag} auto: {self.plain}: {why}"
        return self.auto_choice(plain, kernel, shape)

    def auto_choice(self, plain: float, kernel: float, shape: str) -> tuple[bool, str]:
        """auto's choice from the two timings (milliseconds, or their sums over ranks), and
        its line: the kernels only where faster."""
        timed = f"timed forward and backward on {shape}"
        if kernel < plain:
            return True, (
                f"{self.flag} auto: {self.taken}: {plain / kernel:.2f}× as fast as {self.plain}, "
                f"{timed}"
            )
        return False, (
            f"{self.flag} auto: {self.plain}: {self.kernels} ran at {plain / kernel:.2f}× its "
            f"speed, {timed}"
        )
