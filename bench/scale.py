"""The whole chain at corpus scale, measured per stage and per process, and what a full run costs.

    python -m bench.scale --sizes 256,1024            # ~25 min on 2 cores
    python -m bench.scale --sizes 16 --no-project-full-run   # a quick check of the script

For every size (MB of wikitext) the benchmark builds an enwiki-style multistream dump with its
index (bench.scale_dump --multistream: the sample's pages repeated with new ids, one bz2
stream per 100 pages) and scaled books (the four sample books copied under new names until
they hold --books-share of the wikitext's bytes: BookCorpus is ~5 % of enwiki's), then runs
the chain with two local workers (`--direct_num_workers 2 --direct_running_mode
multi_processing` for the Beam stages; `bertkit vocab` is one process):

    bertkit wikipedia → bertkit books → bertkit vocab (default --sample-mb) → bertkit examples

and prints, per stage: CPU-seconds per MB of the stage's input, wall time, the peak RSS of
every process (the driver and each worker, polled VmHWM: bench.measure), the temporary files
and bytes under the output's `_work/` (polled during the run: the examples stage deletes it
before it writes its manifest) and elsewhere (`.tmp` names), the output bytes, and the
serial time: half-second windows in which at most one process of the tree used CPU (the
driver alone before the workers start and after they stop, any step one worker does alone),
as wall seconds and as the CPU-seconds spent in them (the latter does not grow when other
work on the machine slows the run down, and is what the projection uses).
A second table puts each process's peak RSS side by side across sizes: it must stay flat.

--project-full-run (on by default) then projects a full English Wikipedia (~100 GB of
wikitext, a ~22 GB multistream bz2) plus a BookCorpus-sized corpus (~5 GB, ~11k books) onto
Dataflow from the largest size's per-core figures: vCPU-hours per stage, cost at the list
prices in DATAFLOW_PRICES, and wall time at 32 and 256 vCPUs with every serial step
(job start-up, the serial seconds fitted linearly over the sizes, vocabulary training on its
sample). Results go to WORKDIR/results/scale.json; inputs and outputs stay under
WORKDIR/scale/ (bench/.work, ignored by git).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import runs, scale_dump
from bench.measure import (
    CLOCK_TICKS,
    DEFAULT_WORKDIR,
    MB,
    REPO_ROOT,
    ProcessTreeMonitor,
    argument_parser,
    machine_description,
    measure_command,
    print_table,
    repo_python,
    tail_of,
    write_results,
)

MIB = 1 << 20
BEAM_WORKER_FLAGS = ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")
BOOKS_DIR = REPO_ROOT / "data" / "books"
STAGES = ("wikipedia", "books", "vocab", "examples")
WORK_POLL_S = 1.0  # _work/ is walked once a second; the process tree every 50 ms
TIMELINE_S = 0.5  # CPU use is compared over half-second windows
# A process is active in a window when it used at least this share of a core: a window in
# which at most one process of the tree is active is serial (the other processes had nothing
# to do). Counting processes, not busy cores, keeps the figure right on a machine shared
# with other work, where a process with work may get well under a core.
ACTIVE_CORE_SHARE = 0.1

# The full run to project onto (issue 11): enwiki's multistream dump and a BookCorpus-sized
# book collection.
FULL_WIKITEXT_MB = 100_000.0  # ~100 GB of XML wikitext (a ~22 GB multistream bz2)
FULL_BOOKS_MB = 5_000.0  # ~5 GB of book text, ~11k books
FULL_VOCAB_SAMPLE_MIB = 1024.0  # `bertkit vocab`'s default --sample-mb
# The largest unit of work each Beam stage hands one worker, in MB of the stage's input, from
# the stages' defaults: a wall-time floor however many vCPUs there are. wikipedia: a split of
# --split-mb 64 MiB of bz2, at enwiki's ~100/22 wikitext per bz2 byte; books: --unit-mb 64
# MiB of book files; examples: --work-partition-mb 64 MiB (of token ids, taken as that much
# text, all --dupe-factor passes: an upper bound).
UNIT_MB = {
    "wikipedia": 64 * (1 << 20) / 1e6 * FULL_WIKITEXT_MB / 22_000,
    "books": 64 * (1 << 20) / 1e6,
    "examples": 64 * (1 << 20) / 1e6,
}
JOB_STARTUP_S = 240.0  # Dataflow job start-up, workers up: an assumption (3–5 min per job)
STARTUP_BILLED_S = 120.0  # of which the workers are billed (booting, pulling the image): assumed

# Dataflow list prices, batch, us-central1, USD (cloud.google.com/dataflow/pricing as last
# known: unchanged from 2021 to 2024). NOT verified online from this machine (no network).
DATAFLOW_PRICES = {
    "vcpu_hour": 0.056,
    "memory_gb_hour": 0.003557,
    "pd_gb_hour": 0.000054,  # standard persistent disk
}
MEMORY_GB_PER_VCPU = 3.75  # n1-standard machines, Dataflow's default batch family
DISK_GB_PER_WORKER = 25.0  # boot disk with Dataflow Shuffle (the batch default)
VCPUS_PER_WORKER = 4  # n1-standard-4 workers


# --------------------------------------------------------------------------------------
# Pure helpers (tests/test_bench_scale.py)


def parse_sizes(text: str) -> list[float]:
    """--sizes: MB of wikitext, comma-separated ("1024,256" → [256.0, 1024.0]); each > 0."""
    sizes = runs.parse_sizes(text)
    if not sizes or min(sizes) <= 0:
        raise ValueError(f"--sizes {text!r}: expected positive MB like 256,1024")
    return sizes


def linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of y = a + b·x through the smallest and largest x, with b ≥ 0 and a ≥ 0.

    Serial seconds have a fixed part (imports, planning, the manifest) and maybe a part that
    grows with input; two sizes tell them apart. One size: all of it is taken as fixed.
    """
    points = sorted(points)
    (x0, y0), (x1, y1) = points[0], points[-1]
    if x1 == x0:
        return max(y0, 0.0), 0.0
    slope = max((y1 - y0) / (x1 - x0), 0.0)
    return max(y1 - slope * x1, 0.0), slope


@dataclass(frozen=True)
class StageFigures:
    """One stage's per-core figures, measured, and how much input the full run gives it."""

    stage: str
    cpu_s_per_mb: float  # CPU-seconds per MB of the stage's input (all processes), marginal
    full_input_mb: float  # the full run's input to the stage
    serial_fixed_s: float  # serial seconds: fixed part …
    serial_s_per_mb: float  # … and the part per MB of input
    serial_only: bool = False  # runs in one process outside Dataflow (vocab)
    measured_cores: float = 2.0  # cores the serial-only stage used when measured
    cpu_fixed_s: float = 0.0  # CPU-seconds that do not grow with input (imports, start-up)
    unit_cpu_s: float = 0.0  # CPU-seconds of the largest unit of work one worker gets


@dataclass(frozen=True)
class StageProjection:
    stage: str
    vcpu_hours: float
    cost_usd: float
    serial_s: float
    wall_s: dict[int, float]  # vCPUs → wall seconds


def project_stage(
    figures: StageFigures, vcpus: list[int], prices: dict[str, float] = DATAFLOW_PRICES
) -> StageProjection:
    """vCPU-hours, cost and wall time of one stage of the full run.

    A Dataflow stage: its CPU-seconds spread over the vCPUs (but never faster than its
    largest unit of work, `unit_cpu_s`), plus its serial seconds (done by one core while the
    others wait) and the job's start-up. The vCPU-hours bill every
    vCPU for the whole job after start-up (serial time included: the workers are held), and
    memory (MEMORY_GB_PER_VCPU) and boot disks along with them. A serial-only stage (vocab)
    runs on one machine of `measured_cores` for its serial seconds, no start-up.
    """
    serial_s = figures.serial_fixed_s + figures.serial_s_per_mb * figures.full_input_mb
    cpu_s = figures.cpu_fixed_s + figures.cpu_s_per_mb * figures.full_input_mb
    if figures.serial_only:
        hours = figures.measured_cores * serial_s / 3600
        cost = hours * (prices["vcpu_hour"] + MEMORY_GB_PER_VCPU * prices["memory_gb_hour"])
        return StageProjection(figures.stage, hours, cost, serial_s, dict.fromkeys(vcpus, serial_s))
    # The serial seconds are spent by one core; the rest of the CPU time is spread.
    parallel_cpu_s = max(cpu_s - serial_s, 0.0)
    run_s = {v: serial_s + max(parallel_cpu_s / v, figures.unit_cpu_s) for v in vcpus}
    # The cost does not depend on the vCPU count but for the held-idle serial time: price
    # the largest count, the dearer one, and report it.
    v = max(vcpus)
    billed_s = run_s[v] + STARTUP_BILLED_S
    hours = v * billed_s / 3600
    workers = v / VCPUS_PER_WORKER
    cost = (
        hours * prices["vcpu_hour"]
        + hours * MEMORY_GB_PER_VCPU * prices["memory_gb_hour"]
        + workers * DISK_GB_PER_WORKER * billed_s / 3600 * prices["pd_gb_hour"]
    )
    wall = {n: JOB_STARTUP_S + s for n, s in run_s.items()}
    return StageProjection(figures.stage, hours, cost, serial_s, wall)


def chain_wall_s(projections: dict[str, StageProjection], vcpus: int) -> float:
    """wikipedia and books run side by side (two jobs), then vocab, then examples."""
    wall = {name: p.wall_s[vcpus] for name, p in projections.items()}
    return max(wall["wikipedia"], wall["books"]) + wall["vocab"] + wall["examples"]


# --------------------------------------------------------------------------------------
# Inputs


def build_books(target_bytes: int, directory: Path) -> tuple[int, int]:
    """Copies of the sample books (copy k of X.txt is X-kNNNN.txt) until they hold
    ``target_bytes``; returns (files, bytes). Reused when already complete."""
    done = directory / "_complete.json"
    if done.exists():
        info = json.loads(done.read_text())
        if info["target_bytes"] == target_bytes:
            return info["files"], info["bytes"]
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    sources = sorted(BOOKS_DIR.glob("*.txt"))
    files = total = copy = 0
    while total < max(target_bytes, 1):
        for source in sources:
            shutil.copyfile(source, directory / f"{source.stem}-k{copy:04d}.txt")
            files += 1
            total += source.stat().st_size
        copy += 1
    done.write_text(json.dumps({"target_bytes": target_bytes, "files": files, "bytes": total}))
    return files, total


# --------------------------------------------------------------------------------------
# Watching a stage while it runs


@dataclass
class StageWatch:
    """Polled from the measuring thread: per-process RSS and CPU, busy cores, temporaries."""

    output: Path
    root_pid: int = 0
    started: float = field(default_factory=time.monotonic)
    records: dict = field(default_factory=dict)
    last_window: float = 0.0
    last_ticks: dict = field(default_factory=dict)
    serial_s: float = 0.0  # wall seconds of the serial windows
    serial_cpu_s: float = 0.0  # CPU-seconds spent in them
    timeline: list = field(default_factory=list)  # (seconds, busy cores, active processes)
    last_walk: float = 0.0
    work_files: int = 0
    work_bytes: int = 0
    tmp_files: int = 0
    tmp_bytes: int = 0

    def __call__(self, monitor: ProcessTreeMonitor) -> None:
        now = time.monotonic()
        self.root_pid = monitor.root_pid
        self.records = monitor.records
        if now - self.last_window >= TIMELINE_S:
            ticks = {key: r.cpu_ticks for key, r in monitor.records.items()}
            if self.last_window:
                window = now - self.last_window
                used = [(t - self.last_ticks.get(k, 0)) / CLOCK_TICKS for k, t in ticks.items()]
                active = sum(u >= ACTIVE_CORE_SHARE * window for u in used)
                self.timeline.append(
                    (round(now - self.started, 2), round(sum(used) / window, 2), active)
                )
                if active <= 1:
                    self.serial_s += window
                    self.serial_cpu_s += sum(used)
            self.last_ticks, self.last_window = ticks, now
        if now - self.last_walk >= WORK_POLL_S:
            self.last_walk = now
            self.walk()

    def walk(self) -> None:
        work_files = work_bytes = tmp_files = tmp_bytes = 0
        for root, _, names in os.walk(self.output):
            in_work = "_work" in Path(root).relative_to(self.output).parts
            for name in names:
                try:
                    size = os.stat(os.path.join(root, name)).st_size
                except FileNotFoundError:
                    continue
                if in_work:
                    work_files, work_bytes = work_files + 1, work_bytes + size
                elif ".tmp" in name:
                    tmp_files, tmp_bytes = tmp_files + 1, tmp_bytes + size
        self.work_files = max(self.work_files, work_files)
        self.work_bytes = max(self.work_bytes, work_bytes)
        self.tmp_files = max(self.tmp_files, tmp_files)
        self.tmp_bytes = max(self.tmp_bytes, tmp_bytes)

    def processes(self) -> list[dict[str, Any]]:
        """Every process seen: the driver first, then the workers by pid."""
        rows = [
            {
                "role": "driver"
                if r.pid == self.root_pid
                else ("worker" if r.command.startswith("python") else "helper"),
                "pid": r.pid,
                "command": r.command,
                "cpu_s": r.cpu_ticks / CLOCK_TICKS,
                "peak_rss_mib": r.peak_rss_kib / 1024,
            }
            for r in list(self.records.values())
        ]
        return sorted(rows, key=lambda row: (row["role"] != "driver", row["pid"]))


def code_state() -> dict[str, str]:
    """The commit and the uncommitted changes to the stages' code when a stage starts: in a
    checkout others work in, the code can change between one stage and the next."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
        return done.stdout

    diff = git("diff", "HEAD", "--", "pipelines", "schemas")
    return {
        "head": git("rev-parse", "--short", "HEAD").strip(),
        "uncommitted_diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:12] if diff else "",
    }


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def text_bytes_of(documents: Path) -> int:
    manifest = json.loads((documents / "_manifest.json").read_text())
    return int(manifest["counts"]["text_bytes"])


def run_stage(
    stage: str, args: list[str], input_mb: float, output: Path, log: Path, timeout_s: float
) -> dict[str, Any]:
    """One measured stage on a fresh output directory; its figures as a dict."""
    shutil.rmtree(output, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    watch = StageWatch(output)  # called on bench.measure's polling thread
    command = [repo_python(), "-m", f"pipelines.{stage}", *args]
    code = code_state()
    run = measure_command(command, REPO_ROOT, log, timeout_s, on_sample=watch)
    watch.walk()
    processes = watch.processes()
    workers = [p for p in processes if p["role"] == "worker"]
    driver = next((p for p in processes if p["role"] == "driver"), None)
    figures = {
        "stage": stage,
        "ok": run.ok,
        "log": str(log),
        "code": code,
        "input_mb": input_mb,
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "cpu_s_per_mb": run.cpu_s / input_mb if input_mb else None,
        "serial_s": watch.serial_s,
        "serial_cpu_s": watch.serial_cpu_s,
        "driver_peak_rss_mib": driver["peak_rss_mib"] if driver else run.peak_rss_mib,
        "worker_peak_rss_mib": [w["peak_rss_mib"] for w in workers],
        "tree_rss_mib": run.tree_rss_mib,
        "work_files": watch.work_files,
        "work_bytes": watch.work_bytes,
        "tmp_files": watch.tmp_files,
        "tmp_bytes": watch.tmp_bytes,
        "output_bytes": directory_bytes(output) if output.exists() else 0,
        "processes": processes,
        "timeline": watch.timeline,
    }
    status = "ok" if run.ok else f"FAILED (exit {run.returncode}, log {log})"
    print(
        f"  {stage:<9} {run.wall_s:7.1f} s wall, {run.cpu_s:8.1f} CPU-s, "
        f"{len(processes)} processes: {status}",
        flush=True,
    )
    if not run.ok:
        print(tail_of(log), flush=True)
    return figures


def run_chain(size_mb: float, args: Any) -> dict[str, Any]:
    """Build the inputs of one size and run the four stages on them."""
    base = args.workdir / "scale"
    print(f"\n{size_mb:g} MB of wikitext:", flush=True)
    runs.build_in_child(
        "bench.scale_dump", "--target-mb", f"{size_mb:g}", "--multistream",
        "--jobs", "2", "--workdir", str(base),
    )  # fmt: skip
    dump_path, info_path = scale_dump.scaled_dump_paths(base, size_mb, multistream=True)
    dump = json.loads(info_path.read_text())
    books_dir = base / f"books-{size_mb:g}mb"
    book_files, book_bytes = build_books(int(size_mb * MB * args.books_share), books_dir)
    out = base / "out" / f"{size_mb:g}mb"
    logs = args.workdir / "logs" / "scale"
    wiki, books, vocab, shards = (out / name for name in ("wikipedia", "books", "vocab", "shards"))
    print(
        f"  inputs: {dump['wikitext_bytes'] / MB:.1f} MB wikitext in {dump['pages']} pages, "
        f"{dump['compressed_bytes'] / MB:.1f} MB multistream bz2 + index; "
        f"{book_files} books, {book_bytes / MB:.1f} MB",
        flush=True,
    )
    stages = {}
    timeout = args.timeout_s
    stages["wikipedia"] = run_stage(
        "wikipedia",
        ["--input", str(dump_path), "--output", str(wiki), *BEAM_WORKER_FLAGS],
        dump["wikitext_bytes"] / MB, wiki, logs / f"wikipedia-{size_mb:g}mb.log", timeout,
    )  # fmt: skip
    stages["books"] = run_stage(
        "books",
        ["--input", str(books_dir / "*.txt"), "--output", str(books), *BEAM_WORKER_FLAGS],
        book_bytes / MB, books, logs / f"books-{size_mb:g}mb.log", timeout,
    )  # fmt: skip
    if not (stages["wikipedia"]["ok"] and stages["books"]["ok"]):
        return {"size_mb": size_mb, "dump": dump, "stages": stages}
    documents_mb = (text_bytes_of(wiki) + text_bytes_of(books)) / MB
    vocab_args = ["--documents", str(wiki), str(books), "--output", str(vocab)]
    stages["vocab"] = run_stage(
        "vocab", vocab_args, min(documents_mb, FULL_VOCAB_SAMPLE_MIB * MIB / MB), vocab,
        logs / f"vocab-{size_mb:g}mb.log", timeout,
    )  # fmt: skip
    if stages["vocab"]["ok"]:
        stages["examples"] = run_stage(
            "examples",
            ["--documents", str(wiki), str(books), "--vocab", str(vocab),
             "--output", str(shards), *BEAM_WORKER_FLAGS],
            documents_mb, shards, logs / f"examples-{size_mb:g}mb.log", timeout,
        )  # fmt: skip
    return {
        "size_mb": size_mb,
        "dump": dump,
        "books": {"files": book_files, "bytes": book_bytes},
        "documents_mb": {"wikipedia": text_bytes_of(wiki) / MB, "books": text_bytes_of(books) / MB},
        "stages": stages,
    }


# --------------------------------------------------------------------------------------
# Reports


def mib(value: float) -> str:
    return f"{value:,.0f}"


def print_stage_table(chain: dict[str, Any]) -> None:
    print(f"\n{chain['size_mb']:g} MB of wikitext (2 local workers):")
    headers = ["stage", "input MB", "CPU-s", "CPU-s/MB", "wall s", "serial s", "serial CPU-s",
               "driver RSS MiB", "worker RSS MiB", "_work files", "_work MB", ".tmp files",
               "output MB"]  # fmt: skip
    rows = []
    for stage in STAGES:
        s = chain["stages"].get(stage)
        if s is None:
            continue
        workers = "/".join(mib(w) for w in s["worker_peak_rss_mib"]) or "-"
        rows.append([
            stage + ("" if s["ok"] else " FAILED"), f"{s['input_mb']:,.1f}", f"{s['cpu_s']:,.1f}",
            f"{s['cpu_s_per_mb']:.3f}", f"{s['wall_s']:,.1f}", f"{s['serial_s']:,.1f}",
            f"{s['serial_cpu_s']:,.1f}",
            mib(s["driver_peak_rss_mib"]), workers, f"{s['work_files']:,}",
            f"{s['work_bytes'] / MB:,.1f}", f"{s['tmp_files']:,}", f"{s['output_bytes'] / MB:,.1f}",
        ])  # fmt: skip
    print_table(headers, rows, left=(0, 8))


def print_rss_side_by_side(chains: list[dict[str, Any]]) -> None:
    """Peak RSS of the driver and of the largest worker per stage, one column per size."""
    print("\nPeak RSS (MiB) by input size: driver / largest worker")
    headers = ["stage", *(f"{c['size_mb']:g} MB" for c in chains), "largest ÷ smallest"]
    rows = []
    for stage in STAGES:
        cells, peaks = [], []
        for chain in chains:
            s = chain["stages"].get(stage)
            if s is None:
                cells.append("-")
                continue
            worker = max(s["worker_peak_rss_mib"], default=0.0)
            cells.append(f"{mib(s['driver_peak_rss_mib'])} / {mib(worker) if worker else '-'}")
            peaks.append(max(s["driver_peak_rss_mib"], worker))
        ratio = f"{peaks[-1] / peaks[0]:.2f}" if len(peaks) > 1 and peaks[0] else "-"
        rows.append([stage, *cells, ratio])
    print_table(headers, rows)


def stage_figures(chains: list[dict[str, Any]]) -> dict[str, StageFigures]:
    """Per-core figures fitted over the sizes: CPU-seconds and serial seconds, each a fixed
    part (Beam's start-up in every process, imports) plus a part per MB of input; the part
    per MB is what a full run multiplies."""
    largest = chains[-1]
    docs = largest["documents_mb"]
    # The examples stage reads the documents: their text per MB of each stage's input.
    wiki_text_per_mb = docs["wikipedia"] / largest["stages"]["wikipedia"]["input_mb"]
    books_text_per_mb = docs["books"] / largest["stages"]["books"]["input_mb"]
    full_inputs = {
        "wikipedia": FULL_WIKITEXT_MB,
        "books": FULL_BOOKS_MB,
        "vocab": FULL_VOCAB_SAMPLE_MIB * MIB / MB,
        "examples": FULL_WIKITEXT_MB * wiki_text_per_mb + FULL_BOOKS_MB * books_text_per_mb,
    }
    figures = {}
    for stage in STAGES:
        measured = [c["stages"][stage] for c in chains if stage in c["stages"]]
        if stage == "vocab":
            # One process, all of it serial, growing with the sample: its wall time, or its
            # CPU time where other work on the machine slowed it (tokenizers may use threads).
            fixed, per_mb = linear_fit(
                [(s["input_mb"], min(s["wall_s"], s["cpu_s"])) for s in measured]
            )
        else:
            # A Beam stage's serial windows here are the driver's start and finish and the
            # tail of the last unit of work: fixed, not per MB (the unit floor covers the
            # tail at scale). books' whole input is one 64 MiB unit at these sizes, so its
            # serial time grows with it; fitting that per MB would call a parallel stage
            # serial.
            fixed, per_mb = measured[-1]["serial_cpu_s"], 0.0
        cpu_fixed, cpu_per_mb = linear_fit([(s["input_mb"], s["cpu_s"]) for s in measured])
        if cpu_per_mb == 0:  # one size (or noise): the average, start-up included
            cpu_fixed, cpu_per_mb = 0.0, measured[-1]["cpu_s"] / measured[-1]["input_mb"]
        figures[stage] = StageFigures(
            stage=stage,
            cpu_s_per_mb=cpu_per_mb,
            cpu_fixed_s=cpu_fixed,
            full_input_mb=full_inputs[stage],
            serial_fixed_s=fixed,
            serial_s_per_mb=per_mb,
            serial_only=stage == "vocab",
            measured_cores=min(os.cpu_count() or 2, 2),
            unit_cpu_s=UNIT_MB.get(stage, 0.0) * cpu_per_mb,
        )
    return figures


def say(text: str) -> None:
    """A long line of the report, wrapped and indented."""
    print(textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="    "))


def print_projection(chains: list[dict[str, Any]], vcpus: list[int]) -> dict[str, Any]:
    figures = stage_figures(chains)
    projections = {name: project_stage(f, vcpus) for name, f in figures.items()}
    print(
        f"\nFull run projected onto Dataflow from the {chains[-1]['size_mb']:g} MB figures: "
        f"{FULL_WIKITEXT_MB / 1000:g} GB of wikitext + {FULL_BOOKS_MB / 1000:g} GB of books"
    )
    say(
        f"prices (USD, batch, us-central1, list prices as last known, 2024; NOT verified "
        f"online here): vCPU-hour {DATAFLOW_PRICES['vcpu_hour']}, memory GB-hour "
        f"{DATAFLOW_PRICES['memory_gb_hour']} ({MEMORY_GB_PER_VCPU} GB per vCPU, "
        f"n1-standard-{VCPUS_PER_WORKER}), PD GB-hour {DATAFLOW_PRICES['pd_gb_hour']} "
        f"({DISK_GB_PER_WORKER:g} GB per worker)"
    )
    say(
        f"assumptions: Dataflow job start-up {JOB_STARTUP_S / 60:g} min per job (3–5 min), "
        f"the workers billed for {STARTUP_BILLED_S / 60:g} min of it; "
        "CPU-s fitted a + b·MB over the sizes, b (the marginal CPU-s/MB below) times the full "
        "input; the CPU time spreads over every vCPU, never faster than the largest unit of "
        "work (unit s), but for the serial seconds (a Beam stage's serial CPU-s at the largest "
        "size; vocab's time fitted over the sizes), which one core does while the rest are "
        "billed idle; vocab runs on "
        f"one {figures['vocab'].measured_cores:g}-core machine (no Dataflow job) on its "
        f"{FULL_VOCAB_SAMPLE_MIB:g} MiB sample; wikipedia and books are two jobs side by "
        "side. Not counted: Dataflow Shuffle (the GroupByKeys carry keys, paths and counts), "
        "GCS storage and requests"
    )
    headers = ["stage", "full input MB", "CPU-s/MB", "vCPU-h", "serial s", "unit s",
               *(f"wall @{v} vCPU" for v in vcpus), f"USD @{max(vcpus)}"]  # fmt: skip
    rows = []
    for name in STAGES:
        f, p = figures[name], projections[name]
        rows.append([
            name, f"{f.full_input_mb:,.0f}", f"{f.cpu_s_per_mb:.3f}", f"{p.vcpu_hours:,.1f}",
            f"{p.serial_s:,.0f}", f"{f.unit_cpu_s:,.0f}",
            *(f"{p.wall_s[v] / 60:,.1f} min" for v in vcpus),
            f"{p.cost_usd:,.2f}",
        ])  # fmt: skip
    total_hours = sum(p.vcpu_hours for p in projections.values())
    total_cost = sum(p.cost_usd for p in projections.values())
    walls = {v: chain_wall_s(projections, v) for v in vcpus}
    rows.append(["chain", "", "", f"{total_hours:,.1f}", "", "",
                 *(f"{walls[v] / 60:,.1f} min" for v in vcpus), f"{total_cost:,.2f}"])  # fmt: skip
    print_table(headers, rows)
    serial = max(((name, p.serial_s) for name, p in projections.items()), key=lambda item: item[1])
    examples = chains[-1]["stages"]["examples"]
    scale = figures["examples"].full_input_mb / examples["input_mb"]
    say(
        f"the examples stage's _work/ peaks at {examples['work_bytes'] * scale / 1e9:,.0f} GB "
        f"(under the output, deleted at the end) and writes "
        f"{examples['output_bytes'] * scale / 1e9:,.0f} GB of shards at full scale "
        f"({examples['work_bytes'] / examples['output_bytes']:.1f}× and "
        f"{examples['output_bytes'] / (examples['input_mb'] * MB):.1f}× its input here)"
    )
    say(
        f"largest serial step: {serial[0]}, {serial[1] / 60:.1f} min of the chain's wall time "
        f"(beside the assumed {JOB_STARTUP_S / 60:g} min start-up of each Dataflow job)"
    )
    return {
        "figures": {k: asdict(v) for k, v in figures.items()},
        "projections": {k: asdict(v) for k, v in projections.items()},
        "total_vcpu_hours": total_hours,
        "total_cost_usd": total_cost,
        "chain_wall_s": walls,
        "largest_serial": serial,
    }


def main() -> None:
    parser = argument_parser("bench.scale", __doc__)
    parser.add_argument("--sizes", default="256,1024", help="MB of wikitext (default 256,1024)")
    parser.add_argument(
        "--books-share", type=float, default=0.05,
        help="book bytes per wikitext byte (default 0.05: BookCorpus ÷ enwiki)",
    )  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--timeout-s", type=float, default=3 * 3600, help="per stage")
    parser.add_argument(
        "--project-full-run", action=argparse.BooleanOptionalAction, default=True,
        help="print the Dataflow projection (default on; --no-project-full-run skips it)",
    )  # fmt: skip
    parser.add_argument("--vcpus", default="32,256", help="vCPU counts to project wall time at")
    parser.add_argument(
        "--from-results", type=Path, default=None,
        help="print the tables from an earlier run's results JSON instead of running",
    )  # fmt: skip
    args = parser.parse_args()
    vcpus = [int(v) for v in args.vcpus.split(",")]
    if args.from_results:
        chains = json.loads(args.from_results.read_text())["chains"]
    else:
        chains = [run_chain(size, args) for size in parse_sizes(args.sizes)]
    for chain in chains:
        print_stage_table(chain)
    print_rss_side_by_side(chains)
    results: dict[str, Any] = {"chains": chains}
    complete = all(set(c["stages"]) == set(STAGES) for c in chains)
    if args.project_full_run and complete:
        results["projection"] = print_projection(chains, vcpus)
    elif args.project_full_run:
        print("\nno projection: a stage failed (see its log)")
    results["machine"] = machine_description()
    if not args.from_results:
        write_results(args.workdir / "results" / "scale.json", results)


if __name__ == "__main__":
    main()
