"""Benchmark the trainer's input pipeline: samples per CPU-second (per core) and per wall-second.

    python -m bench.loader                                    # out/demo/shards, 3 repeats
    python -m bench.loader --repeats 1 --limit-samples 20000  # a quick look
    python -m bench.loader --no-s3 --json bench/.work/loader-results.json
    python -m bench.loader --shards DIR                       # other shards than the demo's
    python -m bench.loader --no-s3 --gc-off                   # the collector off: own work

Run from the repository root, after `bertkit demo` (which writes out/demo/shards) or with
--shards. What is measured: the shards' train split read, decoded and collated into the batch
tensors of schemas/batch.py (padded to a multiple of 8), in this one process, with no loader
workers (num_workers=0). CPU is this process's own user+sys time (time.process_time), so
samples per CPU-second is the rate of one core; wall time is beside it. Set-up (opening the
source, starting the S3 server, uploading) is outside the timed region. Every row runs once
per repeat, the rows interleaved, so a change of load on the machine hits them all alike; the
table shows the medians. The rows:

  bertkit local    trainer.data: open_source(DIR) → PretrainingLoader(LoaderConfig(B)).epoch,
                   the training epoch's order (trainer/order.py: the shards in a seeded
                   order, the tail short of a batch dropped, samples permuted within windows
                   of --shuffle-buffer's default 10,000), read a window at a time, only the
                   blocks it needs, each block's sha256 checked before its samples are used:
                   what one `bertkit train` process without loader workers runs
  bertkit local, dynamic  the same with --masking dynamic at 0.15, 80/10/10: stored masks
                   undone and new ones drawn (trainer/masking.py), the manifest's vocabulary
  one source, long  the first row's loader for --mix-epochs epochs' samples (default 10),
                   epoch after epoch (PretrainingLoader.batches)
  mix, long        the same loader over a mix (trainer/mix.py) of two sources at 0.7/0.3,
                   the shards and a copy of them in another directory (a temporary one), as
                   `bertkit train --shards DIR COPY --mix 0.7,0.3` reads them, for the same
                   samples: side by side with the row above, what mixing costs. Long, as a
                   run is: the mix reads whole windows of each source's order, and a stop
                   leaves the rest of each source's window in progress read and unused
  bertkit …, 1.x    the same rows on the same samples in the 1.x layout (one tar member per
                   sample, tests/support/legacy_shards.py), side by side: what the compact
                   2.0 layout (one member per block of 512) changes
  bertkit S3       the same shards (manifest included) uploaded to moto's S3 server on
                   loopback (tests.support.s3server, `python -m moto.server`, started here), read as
                   open_source("s3://BUCKET/shards") through smart_open and boto3. The server
                   is another process on the same cores: its CPU-s is shown apart and is not
                   in the loader's figure (on real S3 it runs on someone else's machines), but
                   it competes for the cores, so the wall figures pay for it
  webdataset       plain webdataset for these shards: WebDataset(paths, shardshuffle=False)
                   .map(unpack_samples of "examples.bin", each PretrainingExample.decode'd)
                   .unlisted() .batched(B, a plain collate to the same tensors); no sample
                   shuffle, no checksum
  reader: bertkit  pipelines.io.shards.iter_tar_samples over the local shards: tar members'
                   bytes only, no decode, no collate (the reader's share of the first row)
  reader: tarfile  Python's tarfile in stream mode ("r|") over the 1.x copy, each member's
                   bytes read: what webdataset's reader is built on

Targets: bertkit local ≥ 50,000 samples per CPU-second, bertkit over S3 ≥ 80 % of bertkit
local per CPU-second of the loader process (wall-second ratio shown too), with dynamic
masking ≥ 100,000 samples per CPU-second at 128 tokens, and the mix ≥ 95 % of one source per
CPU-second on the long rows (mixing costs at most 5 %). Other work on the machine (tests
running beside) slows every row; the load average in the results says how much.
--limit-samples caps each row's samples for a quicker look.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import argparse
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from bench import measure
from bench.loader_rows import reader_rows, take_batches, tarfile_rows, webdataset_rows
from bench.measure import (
    CLOCK_TICKS,
    DEMO_OUTPUT,
    fmt,
    importlib_version,
    read_proc_stat,
    verdict_word,
)
from tests.support.legacy_shards import write_legacy_copy
from tests.support.s3server import client_environment, start_s3_server, stop_server
from trainer.config import TrainConfig
from trainer.data import DataPosition, DataSource, LoaderConfig, PretrainingLoader, open_source
from trainer.masking import DynamicMasking
from trainer.mix import MixedSource
from trainer.recipe import resolve_recipe

DEFAULT_SHARDS = DEMO_OUTPUT / "shards"
SPLIT = "train"
BUCKET = "bertkit-bench"
S3_PREFIX = "shards"

LOCAL_TARGET_PER_CPU_S = 50_000.0
DYNAMIC_TARGET_PER_CPU_S = 100_000.0  # at 128 tokens
S3_TARGET_RATIO = 0.8
MIX_TARGET_RATIO = 0.95
MIX_WEIGHTS = (0.7, 0.3)

ROW_LOCAL = "bertkit local"
ROW_DYNAMIC = "bertkit local, dynamic"
ROW_LONG = "one source, long"
ROW_MIX = "mix, long"
ROW_LOCAL_V1 = "bertkit local, 1.x"
ROW_S3 = "bertkit S3 (moto)"
ROW_S3_V1 = "bertkit S3, 1.x"
ROW_WDS = "webdataset"
ROW_READER = "reader: bertkit"
ROW_READER_V1 = "reader: bertkit 1.x"
ROW_TARFILE = "reader: tarfile 1.x"
S3_ROWS = (ROW_S3, ROW_S3_V1)
S3_PREFIX_V1 = "shards-1x"


# --------------------------------------------------------------------------- the rows


def bertkit_rows(
    source: DataSource, batch_size: int, limit: int | None, masking: DynamicMasking | None = None
) -> int:
    config = LoaderConfig(batch_size, num_workers=0, shuffle=True, masking=masking)
    return take_batches(PretrainingLoader(source, config).epoch(DataPosition()), limit)


def long_rows(source: DataSource | MixedSource, batch_size: int, samples: int) -> int:
    """The first `samples` samples, epoch after epoch (a mix's nominal epochs)."""
    config = LoaderConfig(batch_size, num_workers=0, shuffle=True)
    return take_batches(PretrainingLoader(source, config).batches(DataPosition()), samples)


DEFAULTS = TrainConfig(shards="", output="")  # the dynamic row's masking flags: train's defaults


def dynamic_masking(source: DataSource, vocab: str | None) -> DynamicMasking | None:
    """The dynamic row's masking, as `bertkit train --masking dynamic [--vocab DIR]` makes it."""
    return resolve_recipe(replace(DEFAULTS, masking="dynamic", vocab=vocab), source).dynamic


# --------------------------------------------------------------------------- moto's S3 server


@dataclass
class MotoServer:
    process: subprocess.Popen
    endpoint: str

    def cpu_s(self) -> float:
        """The server's user+sys CPU time so far (all its threads)."""
        stat = read_proc_stat(self.process.pid)
        return stat.cpu_ticks / CLOCK_TICKS if stat else 0.0

    def stop(self) -> None:
        stop_server(self.process)


def start_moto(directories: dict[str, Path]) -> tuple[MotoServer, dict[str, str]]:
    """Start moto's S3 server on loopback, upload each shards directory under its prefix,
    point boto3 at it. Returns the server and the s3:// URL of each prefix."""
    process, endpoint, client = start_s3_server()
    server = MotoServer(process, endpoint)
    # smart_open's boto3 clients read these: every s3:// URL now goes to the loopback server.
    os.environ.update(client_environment(endpoint))
    client.create_bucket(Bucket=BUCKET)
    for prefix, shards in directories.items():
        for path in sorted(shards.rglob("*")):
            if path.is_file():
                key = f"{prefix}/{path.relative_to(shards).as_posix()}"
                client.upload_file(str(path), BUCKET, key)
    return server, {prefix: f"s3://{BUCKET}/{prefix}" for prefix in directories}


# --------------------------------------------------------------------------- measuring


@dataclass
class Run:
    samples: int
    cpu_s: float
    wall_s: float
    server_cpu_s: float | None = None


@dataclass
class RowSummary:
    """Medians over the repeats of one row."""

    row: str
    ok: bool
    samples: int | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    per_cpu_s: float | None = None
    per_wall_s: float | None = None
    server_cpu_s: float | None = None
    error: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)


def measure_row(
    action: Callable[[], int], server: MotoServer | None = None, collector: bool = True
) -> Run:
    gc.collect()  # garbage of the previous row is not this row's work
    server_before = server.cpu_s() if server else None
    if not collector:
        gc.disable()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        samples = action()
    finally:
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        gc.enable()
    server_cpu = server.cpu_s() - server_before if server and server_before is not None else None
    return Run(samples, cpu, wall, server_cpu)


def summarise(row: str, runs: list[Run], error: str | None) -> RowSummary:
    raw = [asdict(run) for run in runs]
    if error is not None or not runs:
        return RowSummary(row, ok=False, error=error, runs=raw)
    servers = [run.server_cpu_s for run in runs if run.server_cpu_s is not None]
    return RowSummary(
        row,
        ok=True,
        samples=runs[-1].samples,
        cpu_s=statistics.median(run.cpu_s for run in runs),
        wall_s=statistics.median(run.wall_s for run in runs),
        per_cpu_s=statistics.median(run.samples / run.cpu_s for run in runs if run.cpu_s > 0),
        per_wall_s=statistics.median(run.samples / run.wall_s for run in runs),
        server_cpu_s=statistics.median(servers) if servers else None,
        runs=raw,
    )


def describe(run: Run) -> str:
    server = f"  server {run.server_cpu_s:5.2f} CPU-s" if run.server_cpu_s is not None else ""
    return (
        f"{run.samples:7,d} samples  cpu {run.cpu_s:6.2f} s  wall {run.wall_s:6.2f} s  "
        f"{run.samples / run.cpu_s if run.cpu_s else 0:9,.0f}/CPU-s  "
        f"{run.samples / run.wall_s:9,.0f}/wall-s{server}"
    )


# --------------------------------------------------------------------------- reporting


def ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value and reference else None


def print_results(summaries: dict[str, RowSummary], batch_size: int) -> None:
    local = summaries.get(ROW_LOCAL)
    ref_cpu = local.per_cpu_s if local else None
    ref_wall = local.per_wall_s if local else None
    print(
        f"\nInput pipeline, batch {batch_size}, one process, no workers (median of repeats; "
        "CPU = this process only)"
    )
    headers = [
        "row",
        "samples",
        "CPU s",
        "wall s",
        "samples/CPU-s",
        "samples/wall-s",
        "vs local CPU",
        "vs local wall",
        "server CPU s",
    ]
    rows = []
    for summary in summaries.values():
        if not summary.ok:
            rows.append([summary.row, "FAILED", *["n/a"] * (len(headers) - 2)])
            continue
        cpu_ratio, wall_ratio = (
            ratio(summary.per_cpu_s, ref_cpu),
            ratio(summary.per_wall_s, ref_wall),
        )
        rows.append(
            [
                summary.row,
                fmt(summary.samples, ",d"),
                fmt(summary.cpu_s, ".2f"),
                fmt(summary.wall_s, ".2f"),
                fmt(summary.per_cpu_s, ",.0f"),
                fmt(summary.per_wall_s, ",.0f"),
                fmt(cpu_ratio, ".2f") + ("×" if cpu_ratio else ""),
                fmt(wall_ratio, ".2f") + ("×" if wall_ratio else ""),
                fmt(summary.server_cpu_s, ".2f") if summary.server_cpu_s is not None else "",
            ]
        )
    measure.print_markdown_table(headers, rows)
    for summary in summaries.values():
        if not summary.ok:
            print(f"{summary.row}: {summary.error}")


def verdicts(summaries: dict[str, RowSummary]) -> dict[str, Any]:
    local, s3 = summaries.get(ROW_LOCAL), summaries.get(ROW_S3)
    local_rate = local.per_cpu_s if local and local.ok else None
    s3_ok = s3 is not None and s3.ok
    cpu_ratio = ratio(s3.per_cpu_s, local_rate) if s3_ok else None  # type: ignore[union-attr]
    wall_ratio = (
        ratio(s3.per_wall_s, local.per_wall_s) if s3_ok and local else None  # type: ignore[union-attr]
    )
    wds = summaries.get(ROW_WDS)
    dynamic = summaries.get(ROW_DYNAMIC)
    dynamic_rate = dynamic.per_cpu_s if dynamic and dynamic.ok else None

    def over(row: str, other: str) -> float | None:
        a, b = summaries.get(row), summaries.get(other)
        return ratio(a.per_cpu_s, b.per_cpu_s) if a and a.ok and b and b.ok else None

    return {
        "layout_2_over_1x_local_per_cpu_s": over(ROW_LOCAL, ROW_LOCAL_V1),
        "layout_2_over_1x_s3_per_cpu_s": over(ROW_S3, ROW_S3_V1),
        "local_per_cpu_s": local_rate,
        "local_target_per_cpu_s": LOCAL_TARGET_PER_CPU_S,
        "local_met": local_rate is not None and local_rate >= LOCAL_TARGET_PER_CPU_S,
        "dynamic_per_cpu_s": dynamic_rate,
        "dynamic_target_per_cpu_s": DYNAMIC_TARGET_PER_CPU_S,
        "dynamic_met": dynamic_rate is not None and dynamic_rate >= DYNAMIC_TARGET_PER_CPU_S,
        "dynamic_over_static_per_cpu_s": ratio(dynamic_rate, local_rate),
        "s3_over_local_per_cpu_s": cpu_ratio,
        "s3_over_local_per_wall_s": wall_ratio,
        "s3_target_ratio": S3_TARGET_RATIO,
        "s3_met_cpu": cpu_ratio is not None and cpu_ratio >= S3_TARGET_RATIO,
        "s3_met_wall": wall_ratio is not None and wall_ratio >= S3_TARGET_RATIO,
        "mix_over_one_source_per_cpu_s": over(ROW_MIX, ROW_LONG),
        "mix_target_ratio": MIX_TARGET_RATIO,
        "mix_met": (over(ROW_MIX, ROW_LONG) or 0) >= MIX_TARGET_RATIO,
        "bertkit_over_webdataset_per_cpu_s": ratio(local_rate, wds.per_cpu_s)
        if wds and wds.ok
        else None,
    }


def print_verdicts(result: dict[str, Any]) -> None:
    rate = result["local_per_cpu_s"]
    print(
        f"target local: ≥ {LOCAL_TARGET_PER_CPU_S:,.0f} samples/CPU-s -> "
        f"{verdict_word(rate is not None, result['local_met'])} ({fmt(rate, ',.0f')})"
    )
    dynamic = result["dynamic_per_cpu_s"]
    print(
        f"target dynamic masking: ≥ {DYNAMIC_TARGET_PER_CPU_S:,.0f} samples/CPU-s -> "
        f"{verdict_word(dynamic is not None, result['dynamic_met'])} ({fmt(dynamic, ',.0f')}, "
        f"{fmt(result['dynamic_over_static_per_cpu_s'], '.2f')}× static)"
    )
    cpu_ratio, wall_ratio = result["s3_over_local_per_cpu_s"], result["s3_over_local_per_wall_s"]
    print(
        f"target S3: ≥ {S3_TARGET_RATIO:.0%} of local per CPU-s of the loader process -> "
        f"{verdict_word(cpu_ratio is not None, result['s3_met_cpu'])} "
        f"({fmt(cpu_ratio, '.2f')}×); per wall-s (server on the same cores) -> "
        f"{verdict_word(wall_ratio is not None, result['s3_met_wall'])} ({fmt(wall_ratio, '.2f')}×)"
    )
    mixed = result["mix_over_one_source_per_cpu_s"]
    print(
        f"target mix of 2 sources at {MIX_WEIGHTS[0]}/{MIX_WEIGHTS[1]}: ≥ {MIX_TARGET_RATIO:.0%} "
        f"of one source per CPU-s -> {verdict_word(mixed is not None, result['mix_met'])} "
        f"({fmt(mixed, '.3f')}×)"
    )
    for where in ("local", "s3"):
        value = result[f"layout_2_over_1x_{where}_per_cpu_s"]
        if value is not None:
            print(
                f"2.0 layout (a member per block) / 1.x (a member per sample), {where}, per "
                f"CPU-s: {value:.2f}× (target ≥ 1.00×)"
            )
    versus = result["bertkit_over_webdataset_per_cpu_s"]
    if versus is not None:
        print(f"bertkit local / plain webdataset, per CPU-s: {versus:.2f}×")


# --------------------------------------------------------------------------- main


def _bytes_per_sample(source: DataSource) -> float:
    return sum(shard.bytes or 0 for shard in source.shards) / source.samples


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = measure.argument_parser("bench.loader", __doc__)
    parser.add_argument(
        "--shards", type=Path, default=DEFAULT_SHARDS, help="shards directory (default: the demo's)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of every row (median)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument(
        "--limit-samples", type=int, help="stop each row after this many samples (default: all)"
    )
    parser.add_argument("--vocab", help="the dynamic row's vocabulary (default: the manifest's)")
    parser.add_argument("--no-s3", action="store_true", help="skip the moto S3 row")
    parser.add_argument(
        "--mix-epochs", type=int, default=10, help="the long rows' samples, in epochs (10)"
    )
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="measure with Python's garbage collector off: the rows' own work without the "
        "full collections that what a loader holds brings on",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.batch_size < 1 or args.mix_epochs < 1:
        parser.error("--repeats, --batch-size and --mix-epochs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shards: Path = args.shards.resolve()
    if not (shards / "manifest.json").exists():
        print(
            f"no shards at {shards} (no manifest.json). Make the demo's with `bertkit demo` "
            "(writes out/demo/shards), or give --shards DIR",
            file=sys.stderr,
        )
        return 2
    torch.set_num_threads(1)  # one core: nothing here should use torch's thread pool anyway
    local = open_source(str(shards), SPLIT)
    paths = [shard.url for shard in local.shards]
    limit = args.limit_samples
    # The same samples in the 1.x layout (a tar member per sample), read side by side.
    legacy_dir = Path(tempfile.mkdtemp(prefix="bertkit-loader-1x-"))
    write_legacy_copy(shards, legacy_dir)
    local_v1 = open_source(str(legacy_dir), SPLIT)
    # The mix's second source: a copy of the shards in another directory.
    copy_dir = Path(tempfile.mkdtemp(prefix="bertkit-loader-mix-")) / "shards"
    shutil.copytree(shards, copy_dir)
    mix = MixedSource((local, open_source(str(copy_dir), SPLIT)), ("shards", "copy"), MIX_WEIGHTS)
    long = local.samples // args.batch_size * args.batch_size * args.mix_epochs
    long = min(limit, long) if limit else long
    paths_v1 = [shard.url for shard in local_v1.shards]
    print(
        f"{shards}: {len(paths)} {SPLIT} shards, {local.samples:,} samples, seq "
        f"{local.max_seq_length}; batch {args.batch_size}; bytes per sample on disk "
        f"{_bytes_per_sample(local):,.0f} (2.0 layout) and {_bytes_per_sample(local_v1):,.0f} "
        "(1.x)" + (f", at most {limit:,} samples per row" if limit else ""),
        flush=True,
    )

    server: MotoServer | None = None
    s3_sources: dict[str, DataSource] = {}
    s3_error: str | None = None
    if not args.no_s3:
        try:
            started = time.perf_counter()
            server, urls = start_moto({S3_PREFIX: shards, S3_PREFIX_V1: legacy_dir})
            s3_sources = {
                ROW_S3: open_source(urls[S3_PREFIX], SPLIT),
                ROW_S3_V1: open_source(urls[S3_PREFIX_V1], SPLIT),
            }
            print(
                f"moto S3 server at {server.endpoint} (pid {server.process.pid}), shards "
                f"uploaded to {', '.join(urls.values())} in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
        except Exception as error:  # noqa: BLE001 - the other rows still run
            s3_error = f"moto S3 set-up failed: {type(error).__name__}: {error}"
            print(s3_error, flush=True)

    masking: DynamicMasking | None = None
    masking_error: str | None = None
    try:
        masking = dynamic_masking(local, args.vocab)
    except (OSError, ValueError) as error:  # VocabError is a ValueError; the rest still run
        masking_error = f"dynamic masking set-up failed: {type(error).__name__}: {error}"
        print(masking_error, flush=True)

    actions: dict[str, Callable[[], int]] = {
        ROW_LOCAL: lambda: bertkit_rows(local, args.batch_size, limit),
        ROW_DYNAMIC: lambda: bertkit_rows(local, args.batch_size, limit, masking),
        ROW_LONG: lambda: long_rows(local, args.batch_size, long),
        ROW_MIX: lambda: long_rows(mix, args.batch_size, long),
        ROW_LOCAL_V1: lambda: bertkit_rows(local_v1, args.batch_size, limit),
    }
    for row, s3_source in s3_sources.items():
        actions[row] = lambda source=s3_source: bertkit_rows(source, args.batch_size, limit)
    actions[ROW_WDS] = lambda: webdataset_rows(paths, args.batch_size, limit)
    actions[ROW_READER] = lambda: reader_rows(paths, limit)
    actions[ROW_READER_V1] = lambda: reader_rows(paths_v1, limit)
    actions[ROW_TARFILE] = lambda: tarfile_rows(paths_v1, limit)

    runs: dict[str, list[Run]] = {row: [] for row in actions}
    errors: dict[str, str | None] = dict.fromkeys(actions)
    errors[ROW_DYNAMIC] = masking_error
    try:
        for repeat in range(1, args.repeats + 1):
            for row, action in actions.items():
                if errors[row] is not None:
                    continue  # a failing row will fail again
                try:
                    run = measure_row(action, server if row in S3_ROWS else None, not args.gc_off)
                except Exception as error:  # noqa: BLE001 - report it, run the rest
                    errors[row] = f"{type(error).__name__}: {error}"
                    print(f"  {row:<18} run {repeat}/{args.repeats}: FAILED {errors[row]}")
                    continue
                runs[row].append(run)
                print(f"  {row:<18} run {repeat}/{args.repeats}: {describe(run)}", flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(legacy_dir)  # this run's own temporary copies
        shutil.rmtree(copy_dir.parent)

    summaries = {row: summarise(row, runs[row], errors[row]) for row in actions}
    if s3_error is not None:
        for row in S3_ROWS:
            summaries[row] = RowSummary(row, ok=False, error=s3_error)
    print_results(summaries, args.batch_size)
    result = verdicts(summaries)
    print_verdicts(result)
    if args.json:
        write_results(args, local, summaries, result)
    return 0 if all(summary.ok for summary in summaries.values()) else 1


def write_results(
    args: argparse.Namespace,
    source: DataSource,
    summaries: dict[str, RowSummary],
    result: dict[str, Any],
) -> None:
    results = {
        "machine": measure.machine_description(
            torch=importlib_version("torch"),
            webdataset=importlib_version("webdataset"),
            moto=importlib_version("moto"),
            smart_open=importlib_version("smart_open"),
            boto3=importlib_version("boto3"),
        ),
        "config": {
            "shards": str(args.shards),
            "split": SPLIT,
            "samples_in_split": source.samples,
            "max_seq_length": source.max_seq_length,
            "batch_size": args.batch_size,
            "repeats": args.repeats,
            "mix_epochs": args.mix_epochs,
            "mix_weights": list(MIX_WEIGHTS),
            "limit_samples": args.limit_samples,
            "gc_off": args.gc_off,
            "loader": asdict(LoaderConfig(args.batch_size, num_workers=0)),
            "dynamic_masking": {"rate": DEFAULTS.mask_rate, "replace": DEFAULTS.mask_replace},
        },
        "rows": {row: asdict(summary) for row, summary in summaries.items()},
        "targets": result,
    }
    measure.write_results(args.json, results)


if __name__ == "__main__":
    sys.exit(main())
