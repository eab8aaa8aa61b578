"""Measuring a command in a fresh child process: CPU time, wall time and peak RSS of its tree.

Shared by the benchmarks that time whole commands (bench.extract, bench.examples); not a
command of its own.

    from bench.measure import measure_command
    run = measure_command([python, "-m", "pipelines.examples", ...], cwd, log_path, 3600)
    run.cpu_s, run.wall_s, run.peak_rss_mib     # user+sys of the whole tree, seconds, MiB

Method: the child starts in a session of its own, so its whole tree is one process group.
The launcher blocks in os.wait4, which gives the exact wall time and the rusage (CPU time) of
the child plus every descendant it waited for. A thread polls /proc every 50 ms for every
process descended from the child (processes seen once stay tracked after re-parenting), for
their CPU ticks and VmHWM: "peak RSS" is the largest single process, "tree RSS" the sum of
every process's peak (an upper bound: pages shared after fork count in each process). The
CPU figure is the larger of rusage and the poll: normally rusage, unless a descendant was
never waited for. ru_maxrss counts only when it is above the launcher's own peak (see
trusted_maxrss_kib), so a launcher should import little before it measures. A run past its
timeout has its whole process group killed.

Also here: the paths and units every benchmark shares (the repository, the work directory,
the demo's output, decimal MB) and the small helpers every benchmark's report uses (the
project's Python, log tails, number formatting, tables, the machine description, writing the
results), so no benchmark copies them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# Scaled inputs, throwaway venvs, tool outputs, logs and results (ignored by git).
DEFAULT_WORKDIR = REPO_ROOT / "bench" / ".work"
DEMO_OUTPUT = REPO_ROOT / "out" / "demo"  # what `bertkit demo` writes by default
MB = 1_000_000  # decimal megabytes everywhere in the benchmarks

POLL_INTERVAL_S = 0.05
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------
# Measuring one child process tree


@dataclass
class ProcessRecord:
    """The latest /proc sample of one process of the tree (identified by pid + start time)."""

    pid: int
    command: str
    cpu_ticks: int = 0
    peak_rss_kib: int = 0


@dataclass(frozen=True)
class ProcStat:
    ppid: int
    cpu_ticks: int
    start_time: int
    command: str


def read_proc_stat(pid: int) -> ProcStat | None:
    """Parse /proc/PID/stat; None if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command may contain spaces and parentheses, so split at the *last* ')'.
    command = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is field 3 of proc(5): ppid = 4, utime = 14, stime = 15, starttime = 22.
    return ProcStat(
        ppid=int(fields[1]),
        cpu_ticks=int(fields[11]) + int(fields[12]),
        start_time=int(fields[19]),
        command=command,
    )


def read_peak_rss_kib(pid: int) -> int:
    """VmHWM (peak resident set) of a live process, in KiB; 0 for zombies or gone ones."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def read_all_proc_stats() -> dict[int, ProcStat]:
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_proc_stat(int(entry))) is not None:
            stats[int(entry)] = stat
    return stats


class ProcessTreeMonitor(threading.Thread):
    """Polls CPU time and VmHWM of every process descended from ``root_pid``.

    The main thread blocks in os.wait4 (exact wall time and rusage); this thread samples
    /proc and kills the child's process group once ``timeout_s`` has passed. Processes seen
    once stay tracked even if re-parented to init, so orphaned helpers still count.
    """

    def __init__(
        self,
        root_pid: int,
        timeout_s: float,
        on_sample: Callable[[ProcessTreeMonitor], None] | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.on_sample = on_sample
        self.deadline = time.monotonic() + timeout_s
        self.records: dict[tuple[int, int], ProcessRecord] = {}
        self.timed_out = False
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            if self.on_sample is not None:
                self.on_sample(self)
            if time.monotonic() > self.deadline and not self.timed_out:
                self.timed_out = True
                kill_process_group(self.root_pid)
            self._stop_event.wait(POLL_INTERVAL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def sample(self) -> None:
        stats = read_all_proc_stats()
        for pid in self.tree_pids(stats):
            stat = stats[pid]
            record = self.records.setdefault(
                (pid, stat.start_time), ProcessRecord(pid=pid, command=stat.command)
            )
            record.cpu_ticks = max(record.cpu_ticks, stat.cpu_ticks)
            record.peak_rss_kib = max(record.peak_rss_kib, read_peak_rss_kib(pid))

    def tree_pids(self, stats: dict[int, ProcStat]) -> set[int]:
        """The root, the still-alive processes tracked before, and all their descendants."""
        children: dict[int, list[int]] = {}
        for pid, stat in stats.items():
            children.setdefault(stat.ppid, []).append(pid)
        tracked_alive = [
            pid
            for (pid, start), _ in self.records.items()
            if pid in stats and stats[pid].start_time == start
        ]
        pending = [pid for pid in [self.root_pid, *tracked_alive] if pid in stats]
        tree: set[int] = set()
        while pending:
            pid = pending.pop()
            if pid not in tree:
                tree.add(pid)
                pending.extend(children.get(pid, ()))
        return tree


def kill_process_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@dataclass
class RunMeasurement:
    wall_s: float
    cpu_s: float  # the larger of the two CPU figures below
    cpu_rusage_s: float  # os.wait4: the child plus every descendant it waited for
    cpu_polled_s: float  # /proc poll: last seen utime+stime summed over the tree
    peak_rss_mib: float  # largest single process (polled VmHWM, or a trustworthy ru_maxrss)
    tree_rss_mib: float  # sum of every process's polled VmHWM
    rusage_maxrss_mib: float  # as reported by os.wait4, see trusted_maxrss_kib
    launcher_hwm_mib: float  # this benchmark's own VmHWM when it started the child
    processes: int
    returncode: int
    timed_out: bool
    log: str
    process_cpu_s: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def trusted_maxrss_kib(ru_maxrss_kib: int, launcher_hwm_kib: int) -> int:
    """ru_maxrss if it measures the child, else 0.

    Linux carries the high-water RSS of the (v)forking parent over into the child at exec,
    so a child's ru_maxrss is never below its launcher's peak: a 10 MiB tool started by a
    300 MiB process reports 300 MiB. Only a figure above the launcher's own peak is the
    child's; otherwise the polled VmHWM (which exec does reset) is the one to use.
    """
    return ru_maxrss_kib if ru_maxrss_kib > launcher_hwm_kib else 0


def measure_command(
    command: list[str],
    cwd: Path,
    log_path: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    on_sample: Callable[[ProcessTreeMonitor], None] | None = None,
) -> RunMeasurement:
    """Run ``command`` in a fresh process (own session) and measure its whole process tree.

    ``env`` replaces the environment (None: inherit this process's). ``on_sample`` is called
    from the polling thread after every poll, with the monitor (its root pid and per-process
    records), for a benchmark that watches more than the totals (bench.scale).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launcher_hwm_kib = read_peak_rss_kib(os.getpid())
    with log_path.open("wb") as log:
        start = time.perf_counter()
        # A new session makes the tree one process group, so a timeout can kill all of it.
        child = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        monitor = ProcessTreeMonitor(child.pid, timeout_s, on_sample)
        monitor.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - start
        monitor.stop()
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
    records = list(monitor.records.values())
    cpu_rusage_s = usage.ru_utime + usage.ru_stime
    cpu_polled_s = sum(r.cpu_ticks for r in records) / CLOCK_TICKS
    maxrss_kib = trusted_maxrss_kib(usage.ru_maxrss, launcher_hwm_kib)
    polled_peak_kib = max((r.peak_rss_kib for r in records), default=0)
    sum_peak_kib = sum(r.peak_rss_kib for r in records)
    return RunMeasurement(
        wall_s=wall_s,
        # Normally rusage >= poll (the poll misses the last <50 ms). A larger poll figure
        # means some descendant was never waited for, and rusage would under-count it.
        cpu_s=max(cpu_rusage_s, cpu_polled_s),
        cpu_rusage_s=cpu_rusage_s,
        cpu_polled_s=cpu_polled_s,
        peak_rss_mib=max(maxrss_kib, polled_peak_kib) / 1024,
        # The sum can only miss what the poll missed, so it is at least the largest process.
        tree_rss_mib=max(maxrss_kib, polled_peak_kib, sum_peak_kib) / 1024,
        rusage_maxrss_mib=usage.ru_maxrss / 1024,
        launcher_hwm_mib=launcher_hwm_kib / 1024,
        processes=len(records),
        returncode=child.returncode,
        timed_out=monitor.timed_out,
        log=str(log_path),
        process_cpu_s={f"{r.pid}:{r.command}": r.cpu_ticks / CLOCK_TICKS for r in records},
    )


# --------------------------------------------------------------------------------------
# Helpers the reports share


def argument_parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's parser: `python -m MODULE` in its usage, its docstring as the help."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def repo_python() -> str:
    """bertkit runs with the project's own venv, wherever a benchmark is launched from."""
    venv_python = REPO_ROOT / ".venv" / "bin" / "python"
    return str(venv_python) if venv_python.exists() else sys.executable


# bertkit's packages a stage process imports from the checkout.
BERTKIT_PACKAGES = ("pipelines", "schemas")


def byte_compile_bertkit() -> None:
    """Byte-compile bertkit's own packages into their __pycache__, as pip does for a package
    it installs: a tool installed from PyPI (WikiExtractor) runs from .pyc files, and so does
    bertkit from a checkout once it has run. Where PYTHONDONTWRITEBYTECODE is set (this
    project's development machines and CI set it), nothing writes them, and every bertkit run
    would compile its modules again, which no user's run does."""
    subprocess.run(
        [repo_python(), "-m", "compileall", "-q", *BERTKIT_PACKAGES], cwd=REPO_ROOT, check=True
    )


def tail_of(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def indent(text: str) -> str:
    return "\n".join("      | " + line for line in text.splitlines())


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def verdict_word(measured: bool, met: bool) -> str:
    """A target's verdict as the reports print it."""
    return "not measured" if not measured else ("MET" if met else "NOT MET")


def print_table(headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> None:
    """Columns padded to their widest cell; the ``left`` ones (text) left-aligned, the rest
    (numbers) right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    for line in [headers, ["-" * w for w in widths], *rows]:
        print(
            "  ".join(
                str(cell).ljust(w) if i in left else str(cell).rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )


def print_markdown_table(headers: list[str], rows: list[list[str]], left: int = 1) -> None:
    """A markdown table padded to its widest cells: the first `left` columns (text)
    left-aligned, the rest (numbers) right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    rules = [("-" * w if i < left else "-" * (w - 1) + ":") for i, w in enumerate(widths)]
    for line in [headers, rules, *rows]:
        cells = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        print("| " + " | ".join(cells) + " |")


def importlib_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# The training step's micro-batches in bench/gpu_check.sh, of STEP_SEQ tokens: base's stages
# run 256 sequences, large's 128. The kernels' benchmarks take their rows from them.
STEP_BATCH = {"base": 256, "large": 128}
STEP_SEQ = 128


# The Triton benchmarks' refusal where it is absent (the train extra has none on a CPU).
NO_TRITON = (
    "Triton is not installed (torch's CUDA wheels bring it; on a CPU: .venv/bin/pip install "
    "-c constraints.txt triton)"
)


def model_list(parser: argparse.ArgumentParser, value: str, known: Iterable[str]) -> list[str]:
    """A comma-separated --model list, each one of `known`; else the parser's error."""
    known = list(known)
    models = [name.strip() for name in value.split(",") if name.strip()]
    if unknown := [name for name in models if name not in known]:
        parser.error(f"--model {','.join(unknown)}: choose from {', '.join(known)}")
    return models


def write_results(path: Path, results: dict[str, Any]) -> None:
    """A benchmark's results as JSON (parents created), and where they went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nresults: {path}")


def machine_description(**versions: str | None) -> dict[str, Any]:
    """CPU, Python and load, plus the tool versions a benchmark names (as keyword arguments).

    The load average is taken when the results are written: other work on the machine
    (tests running beside the benchmark) shows there, and explains a noisy median.
    """
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "load_average_at_end": os.getloadavg(),
        "cpu": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **versions,
    }
