"""What the trainer reports: throughput and MFU, metric logs, and a progress line.

- `peak_flops` / `ThroughputMeter`: sequences/s, tokens/s, achieved model TFLOP/s and MFU
  (model FLOPs utilisation = achieved model FLOP/s / the device's dense peak FLOP/s), the
  number that says whether a run uses its accelerator well, independent of batch size.
- `MetricsLogger`: one JSON object per log event in `metrics.jsonl` (greppable, loads into
  pandas or DuckDB, survives without TensorBoard) and the same scalars as TensorBoard events.
- `ProgressLine`: a live status line on a terminal, periodic plain lines in CI logs.

Only rank 0 should write; every class takes `enabled` so the other ranks can hold the same
objects and call them unconditionally.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import torch

# Shared with the Beam stages' progress line (pipelines/command/progress.py), so both read alike:
# four significant digits (large rates as whole numbers), durations as H:MM:SS.
from pipelines.command.progress import format_duration as _format_duration
from pipelines.command.progress import format_value as _format_value

__all__ = ["METRICS_FILE", "MetricsLogger", "ProgressLine", "ThroughputMeter", "peak_flops"]

METRICS_FILE = "metrics.jsonl"

Number = float | int
# A logged value: a number, None, or a map of names to values (per source, in a mix).
Value = Number | None | Mapping[str, "Value"]

# Dense (no structured sparsity) peak FLOP/s from NVIDIA's datasheets: H100 and H200
# ("Tensor Core GPU" datasheets), A100 (A100 datasheet), A10 and L4 (their product briefs).
# The datasheets print tensor-core figures "with sparsity"; these are half of those.
# fp16 equals bf16 on all of these. Keys are (model token, variant token or None); a variant
# entry wins over the plain model (an "H100 PCIe" is not an SXM H100).
_PEAKS: dict[tuple[str, str | None], dict[str, float]] = {
    ("H100", "PCIE"): {"bf16": 756e12, "tf32": 378e12, "fp32": 51e12},
    ("H100", "NVL"): {"bf16": 835e12, "tf32": 417.5e12, "fp32": 60e12},
    ("H100", None): {"bf16": 989e12, "tf32": 494.5e12, "fp32": 67e12},  # SXM
    ("H200", "NVL"): {"bf16": 835e12, "tf32": 417.5e12, "fp32": 60e12},
    ("H200", None): {"bf16": 989e12, "tf32": 494.5e12, "fp32": 67e12},  # SXM
    ("A100", None): {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12},  # SXM and PCIe alike
    ("A10", None): {"bf16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12},
    ("L4", None): {"bf16": 121e12, "tf32": 60e12, "fp32": 30.3e12},
}

_DTYPES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "bf16",
    "float16": "bf16",
    "tf32": "tf32",
    "fp32": "fp32",
    "float32": "fp32",
}


def _lookup_peak(device_name: str, dtype: str) -> float | None:
    # Whole tokens, not substrings: "A100" contains "A10" and "L40S" contains "L4", and a
    # wrong match would report a plausible but false MFU. Names look like
    # "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA L4".
    tokens = set(re.split(r"[\s\-_]+", device_name.upper()))
    for (model, variant), peaks in _PEAKS.items():
        if model in tokens and (variant is None or variant in tokens):
            return peaks[dtype]
    return None


def peak_flops(
    device: torch.device, dtype: str, override_tflops: float | None = None
) -> float | None:
    """The device's dense peak FLOP/s for `dtype` ("bf16", "fp16", "tf32" or "fp32").

    `override_tflops` (the trainer's `--peak-tflops`, in TFLOP/s) wins over the table; use
    it for a GPU not listed, a CPU, or clocks that differ from the datasheet. Without it, a
    CUDA device is looked up by `torch.cuda.get_device_name` and anything else gives None
    (a CPU's peak depends on cores, clocks and vector units: no honest table exists), as
    does an unlisted GPU; callers then report no MFU.
    "fp32" is the plain CUDA-core rate; with `torch.backends.cuda.matmul.allow_tf32` on,
    matmuls run at the "tf32" rate.
    """
    key = _DTYPES.get(dtype.lower())
    if key is None:
        raise ValueError(
            f"unknown dtype {dtype!r} for peak FLOP/s; use one of: bf16, fp16, tf32, fp32"
        )
    if override_tflops is not None:
        if not (override_tflops > 0):
            raise ValueError(f"--peak-tflops must be a positive number, got {override_tflops}")
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    return _lookup_peak(torch.cuda.get_device_name(device), key)


class ThroughputMeter:
    """Rates over the interval between two `lap()` calls (or construction and the first).

    Call `update()` once per optimizer step with what that step processed and its model
    FLOPs (e.g. 6 x parameters x tokens plus attention, forward and backward; activation
    recomputation does not count, that is what makes it *model* FLOPs). Call `lap()` when
    logging. CUDA runs asynchronously: the caller must `torch.cuda.synchronize()` before
    `lap()`, or the interval measures kernel launches, not work. The clock is injectable
    for tests; it defaults to `time.perf_counter`.

    The first interval includes start-up (compilation, the first batches); call `lap()`
    once after warm-up and discard its result to leave that out.

    With several processes each meter counts its own rank's work: `counts()` are summed over
    the ranks and given to `lap(totals, devices)`, so the rates are the whole job's and the
    MFU is over every device's peak.
    """

    def __init__(
        self, peak_flops: float | None = None, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.peak_flops = peak_flops
        self._clock = clock
        self._start = clock()
        self._sequences = 0
        self._tokens = 0
        self._flops = 0.0

    def update(self, sequences: int, tokens: int, flops: float) -> None:
        self._sequences += sequences
        self._tokens += tokens
        self._flops += flops

    def counts(self) -> tuple[float, float, float]:
        """(sequences, tokens, FLOPs) since the last lap."""
        return float(self._sequences), float(self._tokens), self._flops

    def lap(
        self, totals: Sequence[float] | None = None, devices: int = 1
    ) -> dict[str, float | None]:
        """{"seq_per_s", "tokens_per_s", "model_tflops", "mfu"} since the last lap, then reset.

        `totals`: the job's (sequences, tokens, FLOPs), every rank's `counts()` summed, on
        `devices` devices; this meter's own counts on one device without. Rates are None when
        no time has passed; "mfu" (a fraction, not percent) is None without a peak.
        """
        now = self._clock()
        elapsed = now - self._start
        sequences, tokens, flops = self.counts() if totals is None else totals
        result: dict[str, float | None] = dict.fromkeys(
            ("seq_per_s", "tokens_per_s", "model_tflops", "mfu")
        )
        if elapsed > 0:
            flops_per_s = flops / elapsed
            result["seq_per_s"] = sequences / elapsed
            result["tokens_per_s"] = tokens / elapsed
            result["model_tflops"] = flops_per_s / 1e12
            if self.peak_flops:
                result["mfu"] = flops_per_s / (self.peak_flops * devices)
        self._start = now
        self._sequences = self._tokens = 0
        self._flops = 0.0
        return result


class MetricsLogger:
    """`log_dir/metrics.jsonl` plus TensorBoard scalars; a no-op unless `enabled` (rank 0).

    Each `log(step, kind, values)` appends one line, keys sorted:
    `{"kind": "train", "loss": 2.31, "lr": 0.0001, "step": 100}`. The file is opened in
    append mode, so a resumed run continues it; a run resumed from a checkpoint older than
    the last line logs those steps again, and readers should keep the last line per
    (kind, step). None values are written as null, floats as Python prints them (NaN too:
    a diverged loss should be visible, not dropped).

    A value may be a map of names to values (a mix's samples drawn per source, its
    per-source held-out figures): nested in the JSON line, and in TensorBoard one scalar per
    number, its tag the names joined ("eval/sources/wiki/mlm_loss").

    TensorBoard gets the same values as scalars tagged "<kind>/<name>" ("train/loss"),
    None values skipped. Pass `purge_step` (the first step this run will log) when
    resuming: TensorBoard then hides the events the previous run wrote from that step on.
    `tensorboard=False` writes only the JSON lines and does not need the package.
    """

    def __init__(
        self,
        log_dir: str | Path,
        enabled: bool = True,
        tensorboard: bool = True,
        purge_step: int | None = None,
    ) -> None:
        self.enabled = enabled
        self.log_dir = Path(log_dir)
        self._file: TextIO | None = None
        self._writer: Any = None
        if not enabled:
            return
        writer_class = _summary_writer_class() if tensorboard else None
        with self._writing(METRICS_FILE):
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(self.log_dir / METRICS_FILE, "a", encoding="utf-8")  # noqa: SIM115
        if writer_class is not None:
            _quiet_event_writer_threads()
            with self._writing("the TensorBoard events"):
                self._writer = writer_class(log_dir=str(self.log_dir), purge_step=purge_step)

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """An OSError writing `what` (a full disk, a quota) as one MetricsWriteError naming
        it and the way on: the checkpoints are written apart, so --resume goes on."""
        try:
            yield
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise MetricsWriteError(
                error.errno,
                f"writing {what} in {self.log_dir} failed ({reason}): free space there, then "
                "rerun with --resume (the checkpoints are written apart)",
            ) from error

    def log(self, step: int, kind: str, values: Mapping[str, Value]) -> None:
        if not self.enabled:
            return
        if kind not in ("train", "eval"):
            raise ValueError(f"metrics kind must be 'train' or 'eval', got {kind!r}")
        for name in values:
            if name in ("step", "kind"):
                raise ValueError(f"metric name {name!r} is reserved; rename the value")
        scalars = dict(_scalars(kind, values))  # raises TypeError on a value of no number
        if self._file is None:
            raise RuntimeError("MetricsLogger.log after close(); create a new logger")
        record = {"step": step, "kind": kind, **values}
        with self._writing(METRICS_FILE):
            self._file.write(json.dumps(record, sort_keys=True) + "\n")
            # Flushed per event: a crashed run keeps everything it logged. Events are rare
            # (every few hundred steps), so the cost does not matter.
            self._file.flush()
        if self._writer is not None:
            with self._writing("the TensorBoard events"):
                for tag, value in scalars.items():
                    if value is not None:
                        self._writer.add_scalar(tag, value, step)

    def flush(self) -> None:
        if self._writer is not None:
            with self._writing("the TensorBoard events"):
                self._writer.flush()

    def close(self) -> None:
        if self._file is not None:
            with self._writing(METRICS_FILE):
                self._file.close()
            self._file = None
        if self._writer is not None:
            writer, self._writer = self._writer, None
            with self._writing("the TensorBoard events"):
                writer.close()

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _scalars(prefix: str, values: Mapping[str, Value]) -> Iterator[tuple[str, Number | None]]:
    """(tag, number or None) for every number in `values`, maps walked into: the TensorBoard
    tags; TypeError names a value that is neither a number, None nor a map."""
    for name, value in values.items():
        tag = f"{prefix}/{name}"
        if isinstance(value, Mapping):
            yield from _scalars(tag, value)
        elif value is None or isinstance(value, int | float):
            yield tag, value
        else:
            raise TypeError(
                f"metric {tag.split('/', 1)[1]!r} is a {type(value).__name__}; log a Python "
                "number (tensor.item()), None or a map of them"
            )


class MetricsWriteError(OSError):
    """metrics.jsonl or the TensorBoard events could not be written, said in one line."""

    def __str__(self) -> str:
        return self.strerror or ""


def _quiet_event_writer_threads() -> None:
    """TensorBoard writes its events in a thread of its own, which on a failed write (a full
    disk) stores the error, re-raised by the next write in the run's thread, and also lets
    threading print it as a traceback. The traceback says nothing the run's one line does not
    (MetricsLogger._writing), so that thread's OSErrors are not printed; anything else is."""
    previous = threading.excepthook
    if getattr(previous, "quiets_event_writers", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        writer_thread = type(args.thread).__name__ == "_AsyncWriterThread"
        if not (writer_thread and isinstance(args.exc_value, OSError)):
            previous(args)

    hook.quiets_event_writers = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def _summary_writer_class() -> type:
    # Imported here, not at module level: tensorboard is only in the `train` extra, and a
    # run with tensorboard=False (or another rank) must not need it.
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:  # torch raises ImportError when tensorboard is missing
        raise ImportError(
            "TensorBoard logging needs the tensorboard package: pip install 'bertkit[train]' "
            "(or turn TensorBoard logging off to write only metrics.jsonl)"
        ) from exc
    return SummaryWriter


class ProgressLine:
    """Training progress on stderr: `step 200/1000 | loss 2.345 | seq/s 812.3 | eta 0:05:12`.

    On a terminal the line is rewritten in place ("\\r") at every `update`. Elsewhere (CI
    logs, files, `nohup`) carriage returns pile up into one unreadable line, so a plain line
    is printed only at steps divisible by `every` and at the last step; `close()` prints the
    latest state if it was not printed yet. `values` are shown in the order given, under the
    names given (None skipped). The ETA extrapolates the rate since the first `update`; it
    needs `total` and two updates.

    `tty` overrides the detection by `stream.isatty()`; `clock` is injectable for tests.
    """

    def __init__(
        self,
        total: int | None,
        every: int = 100,
        stream: TextIO | None = None,
        enabled: bool = True,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every < 1:
            raise ValueError(f"ProgressLine every must be >= 1, got {every}")
        self.total = total
        self.every = every
        self.enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self._stream, "isatty", None)
            tty = bool(isatty and isatty())
        self._tty = tty
        self._clock = clock
        self._first: tuple[int, float] | None = None
        self._pending: str | None = None  # non-TTY: the latest line not yet printed
        self._held: dict[str, Number | None] = {}  # shown on every line until replaced
        self._drawn_width = 0  # TTY: width of the line on screen, to blank its remains

    def _render(self, step: int, values: Mapping[str, Number | None]) -> str:
        now = self._clock()
        if self._first is None:
            self._first = (step, now)
        parts = [f"step {step}/{self.total}" if self.total is not None else f"step {step}"]
        shown = {**values, **self._held}
        parts += [f"{name} {_format_value(v)}" for name, v in shown.items() if v is not None]
        first_step, first_time = self._first
        if self.total is not None and step > first_step:
            seconds_per_step = (now - first_time) / (step - first_step)
            parts.append(f"eta {_format_duration(max(0, self.total - step) * seconds_per_step)}")
        return " | ".join(parts)

    def hold(self, values: Mapping[str, Number | None]) -> None:
        """Values shown after those of every `update` from now on, until the next `hold`: a
        mix's per-source held-out MLM loss, from one evaluation to the next."""
        self._held = dict(values)

    def update(self, step: int, values: Mapping[str, Number | None]) -> None:
        if not self.enabled:
            return
        line = self._render(step, values)
        if self._tty:
            padding = " " * max(0, self._drawn_width - len(line))
            self._stream.write(f"\r{line}{padding}")
            self._drawn_width = len(line)
            self._stream.flush()
        elif step % self.every == 0 or step == self.total:
            self._stream.write(line + "\n")
            self._stream.flush()
            self._pending = None
        else:
            self._pending = line

    def close(self) -> None:
        if not self.enabled:
            return
        if self._tty and self._drawn_width:
            self._stream.write("\n")  # leave the final state on screen, cursor below it
        elif self._pending is not None:
            self._stream.write(self._pending + "\n")
        self._pending = None
        self._drawn_width = 0
        self._stream.flush()
