"""Repeated, measured runs of a tool in a benchmark's work directory.

bench.extract and bench.examples both run every tool --repeats times, each time in a fresh
child process (bench.measure) on a fresh output directory, and report the medians; this is
what they share. Not a command of its own. The work directory (--workdir, default
bench/.work) holds, per benchmark:

    WORKDIR/out/<benchmark>/<tool>-<N>mb        the output of the tool's latest run on N MB
    WORKDIR/logs/<benchmark>/<label>-r<k>.log   stdout and stderr of run k

Their inputs (bench.scale_dump, bench.scale_documents) are built in a child process too
(build_in_child): building holds data in memory, and this process's high-water RSS would be
inherited by every child it then launches, in their ru_maxrss (measure.trusted_maxrss_kib).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench.measure import REPO_ROOT, RunMeasurement, indent, measure_command, repo_python, tail_of

# The figures every summary takes the median of, over its runs.
MEDIAN_FIGURES = ("wall_s", "cpu_s", "peak_rss_mib", "tree_rss_mib")


def parse_sizes(text: str) -> list[float]:
    """--sizes: comma-separated MB, each once, smallest first ("50,12,25" -> [12, 25, 50]);
    at least one, each above 0."""
    sizes = sorted({float(part) for part in text.split(",") if part.strip()})
    if not sizes or sizes[0] <= 0:
        raise ValueError(f"--sizes {text!r}: expected positive MB like 256,1024")
    return sizes


def output_dir(workdir: Path, benchmark: str, tool: str, size_mb: float) -> Path:
    return workdir / "out" / benchmark / f"{tool}-{size_mb:g}mb"


def log_path(workdir: Path, benchmark: str, label: str, repeat: int) -> Path:
    return workdir / "logs" / benchmark / f"{label}-r{repeat}.log"


def run_fresh(
    command: list[str],
    cwd: Path,
    output: Path,
    log: Path,
    timeout_s: float,
    create_output: bool = False,
) -> RunMeasurement:
    """One measured run on a fresh output directory: the previous run's output is removed
    first, so the latest run's is the one kept. ``create_output`` makes the (empty) directory,
    for tools that write only into an existing one (WikiExtractor, Google's script)."""
    shutil.rmtree(output, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    if create_output:
        output.mkdir()
    settle()
    return measure_command(command, cwd, log, timeout_s)


SETTLE_S = 1.0


def settle() -> None:
    """Before a measured run: the previous run's written and removed files flushed to disk
    (os.sync), then a pause, so no run starts beside the kernel's writeback of the one
    before it, which slowed that run on a 2-core machine (docs/benchmarks.md)."""
    os.sync()
    time.sleep(SETTLE_S)


def failure(run: RunMeasurement) -> str | None:
    """Why the run failed, for its progress line; None if it succeeded."""
    if run.timed_out:
        return f"TIMED OUT after {run.wall_s:.0f} s (log: {run.log})"
    if run.returncode != 0:
        return f"FAILED with exit code {run.returncode} (log: {run.log})"
    return None


def repeat_until_failure(
    repeats: int, attempt: Callable[[int], tuple[RunMeasurement, str]]
) -> list[RunMeasurement]:
    """`attempt(repeat)` for repeat 1…repeats, each run's line printed (with its log's tail
    if it failed); stops after a failure, since a failing tool fails again."""
    measured = []
    for repeat in range(1, repeats + 1):
        run, line = attempt(repeat)
        measured.append(run)
        print_run(line, run)
        if not run.ok:
            break
    return measured


def print_run(line: str, run: RunMeasurement) -> None:
    """A run's progress line, and the tail of its log if it failed."""
    print(line, flush=True)
    if not run.ok:
        print(indent(tail_of(Path(run.log))), flush=True)


def median_figures(runs: list[RunMeasurement]) -> dict[str, float]:
    """Medians of wall time, CPU time, peak RSS and tree RSS over the runs."""
    return {name: statistics.median(getattr(run, name) for run in runs) for name in MEDIAN_FIGURES}


def build_in_child(module: str, *args: str) -> None:
    """``python -m MODULE ARGS`` with the project's Python from the repository root, to build
    a benchmark's input without raising this process's high-water RSS."""
    subprocess.run([repo_python(), "-m", module, *args], cwd=REPO_ROOT, check=True)
