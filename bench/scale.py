"""The whole chain at corpus scale, measured per stage and per process, and what a full run costs.

    python -m bench.scale --sizes 256,1024            # ~10 min on 2 cores
    python -m bench.scale --sizes 16 --no-project-full-run   # a quick check of the script

For every size (MB of wikitext) the benchmark builds an enwiki-style multistream dump with its
index (bench.scale_dump --multistream: the sample's pages repeated with new ids, one bz2
stream per 100 pages) and scaled books (the four sample books copied under new names until
they hold --books-share of the wikitext's bytes: BookCorpus is ~5 % of enwiki's), then runs
the chain with two local workers (`--direct_num_workers 2 --direct_running_mode
multi_processing` for every stage):

    bertkit wikipedia → bertkit books → bertkit vocab (default --sample-mb) → bertkit examples

plus `bertkit vocab` once more on a 2 % sample (vocab_sampled: what choosing a sample from
every documents file costs, as the full run's 1 GiB of ~48 GB does).

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
Dataflow from the largest size's per-core figures (bench/scale_cost.py), as one job and as
the stages' separate jobs: vCPU-hours, cost at the list prices in DATAFLOW_PRICES, and wall
time at 32 and 256 vCPUs with every serial step (job start-up, the serial seconds, the
vocabulary's learning on one worker). Results go to WORKDIR/results/scale.json, which
`python -m bench.scale_cost` reads to print the projection again; inputs and outputs stay
under WORKDIR/scale/ (bench/.work, ignored by git).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
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
from bench.scale_cost import FULL_VOCAB_SAMPLE_MIB, MIB, STAGES, print_projection

BEAM_WORKER_FLAGS = ("--direct_num_workers", "2", "--direct_running_mode", "multi_processing")
TABLE_STAGES = ("wikipedia", "books", "vocab", "vocab_sampled", "examples")
SAMPLED_SHARE = 0.02  # the vocab_sampled run's --sample-mb, of the documents' text: a full
# run's 1 GiB of enwiki + books' ~48 GB
BOOKS_DIR = REPO_ROOT / "data" / "books"
WORK_POLL_S = 1.0  # _work/ is walked once a second; the process tree every 50 ms
TIMELINE_S = 0.5  # CPU use is compared over half-second windows
# A process is active in a window when it used at least this share of a core: a window in
# which at most one process of the tree is active is serial (the other processes had nothing
# to do). Counting processes, not busy cores, keeps the figure right on a machine shared
# with other work, where a process with work may get well under a core.
ACTIVE_CORE_SHARE = 0.1


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


def sampled_text_mb(vocab_dir: Path) -> float:
    """The text a vocabulary was trained on, MB (its vocab.json)."""
    metadata = json.loads((vocab_dir / "vocab.json").read_text())
    return metadata["sample"]["text_bytes"] / MB


def run_chain(size_mb: float, args: Any) -> dict[str, Any]:
    """Build the inputs of one size and run the four stages on them."""
    base = args.workdir / "scale"
    print(f"\n{size_mb:g} MB of wikitext:", flush=True)
    runs.build_in_child(
        "bench.scale_dump",
        "--target-mb",
        f"{size_mb:g}",
        "--multistream",
        "--jobs",
        "2",
        "--workdir",
        str(base),
    )
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
        dump["wikitext_bytes"] / MB,
        wiki,
        logs / f"wikipedia-{size_mb:g}mb.log",
        timeout,
    )
    stages["books"] = run_stage(
        "books",
        ["--input", str(books_dir / "*.txt"), "--output", str(books), *BEAM_WORKER_FLAGS],
        book_bytes / MB,
        books,
        logs / f"books-{size_mb:g}mb.log",
        timeout,
    )
    if not (stages["wikipedia"]["ok"] and stages["books"]["ok"]):
        return {"size_mb": size_mb, "dump": dump, "stages": stages}
    documents_mb = (text_bytes_of(wiki) + text_bytes_of(books)) / MB
    vocab_args = ["--documents", str(wiki), str(books), "--output", str(vocab), *BEAM_WORKER_FLAGS]
    stages["vocab"] = run_stage(
        "vocab",
        vocab_args,
        min(documents_mb, FULL_VOCAB_SAMPLE_MIB * MIB / MB),
        vocab,
        logs / f"vocab-{size_mb:g}mb.log",
        timeout,
    )
    # The full run's vocabulary reads every documents file for a ~2 % sample: the same stage
    # on a 2 % sample here measures what reading and choosing cost per MB of documents.
    sampled = out / "vocab-sampled"
    sample_mib = documents_mb * MB / MIB * SAMPLED_SHARE
    stages["vocab_sampled"] = run_stage(
        "vocab",
        [*vocab_args[:4], str(sampled), "--sample-mb", f"{sample_mib:.3f}", *BEAM_WORKER_FLAGS],
        documents_mb,
        sampled,
        logs / f"vocab-sampled-{size_mb:g}mb.log",
        timeout,
    )
    stages["vocab_sampled"]["sample_mb"] = sampled_text_mb(sampled)
    shutil.rmtree(sampled, ignore_errors=True)
    if stages["vocab"]["ok"]:
        stages["examples"] = run_stage(
            "examples",
            [
                "--documents",
                str(wiki),
                str(books),
                "--vocab",
                str(vocab),
                "--output",
                str(shards),
                *BEAM_WORKER_FLAGS,
            ],
            documents_mb,
            shards,
            logs / f"examples-{size_mb:g}mb.log",
            timeout,
        )
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
    headers = [
        "stage",
        "input MB",
        "CPU-s",
        "CPU-s/MB",
        "wall s",
        "serial s",
        "serial CPU-s",
        "driver RSS MiB",
        "worker RSS MiB",
        "_work files",
        "_work MB",
        ".tmp files",
        "output MB",
    ]
    rows = []
    for stage in TABLE_STAGES:
        s = chain["stages"].get(stage)
        if s is None:
            continue
        workers = "/".join(mib(w) for w in s["worker_peak_rss_mib"]) or "-"
        rows.append(
            [
                stage + ("" if s["ok"] else " FAILED"),
                f"{s['input_mb']:,.1f}",
                f"{s['cpu_s']:,.1f}",
                f"{s['cpu_s_per_mb']:.3f}",
                f"{s['wall_s']:,.1f}",
                f"{s['serial_s']:,.1f}",
                f"{s['serial_cpu_s']:,.1f}",
                mib(s["driver_peak_rss_mib"]),
                workers,
                f"{s['work_files']:,}",
                f"{s['work_bytes'] / MB:,.1f}",
                f"{s['tmp_files']:,}",
                f"{s['output_bytes'] / MB:,.1f}",
            ]
        )
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


def main() -> None:
    parser = argument_parser("bench.scale", __doc__)
    parser.add_argument("--sizes", default="256,1024", help="MB of wikitext (default 256,1024)")
    parser.add_argument(
        "--books-share",
        type=float,
        default=0.05,
        help="book bytes per wikitext byte (default 0.05: BookCorpus ÷ enwiki)",
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--timeout-s", type=float, default=3 * 3600, help="per stage")
    parser.add_argument(
        "--project-full-run",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print the Dataflow projection (default on; --no-project-full-run skips it)",
    )
    parser.add_argument("--vcpus", default="32,256", help="vCPU counts to project wall time at")
    parser.add_argument(
        "--from-results",
        type=Path,
        default=None,
        help="print the tables from an earlier run's results JSON instead of running",
    )
    args = parser.parse_args()
    vcpus = [int(v) for v in args.vcpus.split(",")]
    if args.from_results:
        chains = json.loads(args.from_results.read_text())["chains"]
    else:
        chains = [run_chain(size, args) for size in runs.parse_sizes(args.sizes)]
    for chain in chains:
        print_stage_table(chain)
    print_rss_side_by_side(chains)
    results: dict[str, Any] = {"chains": chains}
    complete = all(set(STAGES) <= set(c["stages"]) for c in chains)
    if args.project_full_run and complete:
        learn = args.workdir / "results" / "vocab_learn.json"  # python -m bench.vocab_learn
        results["projection"] = print_projection(chains, vcpus, learn)
    elif args.project_full_run:
        print("\nno projection: a stage failed (see its log)")
    results["machine"] = machine_description()
    if not args.from_results:
        write_results(args.workdir / "results" / "scale.json", results)


if __name__ == "__main__":
    main()
