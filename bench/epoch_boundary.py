"""The loader at an epoch boundary with workers: a pool per epoch against one across epochs.

    python -m bench.epoch_boundary                       # out/demo/shards, 2 workers, 3 repeats
    python -m bench.epoch_boundary --shards DIR --batch 128 --step-ms 20 --repeats 5

Run from the repository root, after `bertkit demo` (which writes out/demo/shards) or with
--shards. The trainer's loader (trainer.data) reads the train split with --workers loader
worker processes for --epochs epochs, as the training loop reads it: after each micro-batch
this process sleeps --step-ms (a training step on an accelerator, during which the CPU is
the workers'), then asks for the next. Two rows, interleaved in every repeat so that a
change of load on the machine hits both alike:

  pool per epoch   PretrainingLoader.epoch(DataPosition(e)) for e = 0, 1, …: new worker
                   processes every epoch, each reading its first window before its first
                   micro-batch (how `batches()` read before its workers lived across epochs)
  across epochs    PretrainingLoader.batches(DataPosition()): one pool whose workers go on
                   into the next epoch, reading ahead as they do inside an epoch

For each row: the gaps between consecutive micro-batches' arrivals (a step's sleep and the
wait for the next), their median, the gap at an epoch boundary (epoch e's last micro-batch
to e + 1's first; the median over the boundaries), the longest gap after the first
micro-batch, and the wall time of all the epochs from the first request; the medians over
--repeats. The first micro-batch (the pool's start in both rows) is outside the gaps.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import contextlib
import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.measure import (
    DEFAULT_WORKDIR,
    DEMO_OUTPUT,
    argument_parser,
    machine_description,
    print_table,
    write_results,
)
from trainer.data import DataPosition, DataSource, LoaderConfig, PretrainingLoader, open_source

ROW_PER_EPOCH = "pool per epoch"
ROW_ACROSS = "across epochs"
FIGURES = ("median_gap_ms", "boundary_gap_ms", "longest_gap_ms", "wall_s")


def per_epoch_pools(loader: PretrainingLoader, epochs: int) -> Iterator[Any]:
    """Epoch after epoch, a pool of workers each (what `batches()` did before)."""
    for epoch in range(epochs):
        yield from loader.epoch(DataPosition(epoch))


def arrivals(batches: Iterator[Any], count: int, step_s: float) -> list[float]:
    """When the request for the first micro-batch went out, then when each of `count`
    micro-batches arrived (time.perf_counter), a sleep of `step_s` after each."""
    times = [time.perf_counter()]
    for _ in range(count):
        next(batches)
        times.append(time.perf_counter())
        time.sleep(step_s)
    return times


def summarise(times: list[float], per_epoch: int) -> dict[str, float]:
    """The figures of one read of len(times) - 1 micro-batches, `per_epoch` an epoch."""
    gaps = [later - earlier for earlier, later in itertools.pairwise(times[1:])]
    # gaps[i]: micro-batch i + 1's arrival after micro-batch i's; epoch e starts at e·per_epoch
    boundaries = [gaps[first - 1] for first in range(per_epoch, len(times) - 1, per_epoch)]
    return {
        "median_gap_ms": statistics.median(gaps) * 1000,
        "boundary_gap_ms": statistics.median(boundaries) * 1000,
        "longest_gap_ms": max(gaps) * 1000,
        "wall_s": times[-1] - times[0],
    }


def read_row(
    source: DataSource, config: LoaderConfig, row: str, epochs: int, step_s: float
) -> dict[str, float]:
    loader = PretrainingLoader(source, config)
    make: Callable[[], Iterator[Any]] = (
        (lambda: per_epoch_pools(loader, epochs))
        if row == ROW_PER_EPOCH
        else (lambda: loader.batches(DataPosition()))
    )
    count = loader.batches_per_epoch * epochs
    with loader, contextlib.closing(make()) as batches:  # type: ignore[type-var]
        times = arrivals(batches, count, step_s)
    return summarise(times, loader.batches_per_epoch)


def main() -> None:
    parser = argument_parser("bench.epoch_boundary", __doc__)
    parser.add_argument("--shards", default=str(DEMO_OUTPUT / "shards"), help="shards directory")
    parser.add_argument("--batch", type=int, default=256, help="the micro-batch (default 256)")
    parser.add_argument("--workers", type=int, default=2, help="loader workers (default 2)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs read per row (default 3)")
    parser.add_argument("--step-ms", type=float, default=10.0, help="sleep per micro-batch")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each row (default 3)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error(f"--epochs {args.epochs}: at least 2, to have a boundary")
    source = open_source(args.shards, "train", None)
    config = LoaderConfig(args.batch, num_workers=args.workers)
    runs: dict[str, list[dict[str, float]]] = {ROW_PER_EPOCH: [], ROW_ACROSS: []}
    for repeat in range(args.repeats):
        for row, figures in runs.items():
            figures.append(read_row(source, config, row, args.epochs, args.step_ms / 1000))
            print(f"repeat {repeat + 1}, {row}: {figures[-1]}", flush=True)
    medians = {
        row: {name: statistics.median(run[name] for run in figures) for name in FIGURES}
        for row, figures in runs.items()
    }
    batches = PretrainingLoader(source, config).batches_per_epoch
    print(
        f"\n{source.samples:,} samples, {batches} micro-batches of {args.batch} an epoch, "
        f"{args.workers} workers, {args.epochs} epochs, a step of {args.step_ms:g} ms; "
        f"medians of {args.repeats}\n"
    )
    print_table(
        ["", "median gap ms", "gap at a boundary ms", "longest gap ms", "wall s"],
        [
            [row, *(f"{figures[name]:.{3 if name == 'wall_s' else 1}f}" for name in FIGURES)]
            for row, figures in medians.items()
        ],
    )
    write_results(
        args.workdir / "epoch-boundary-results.json",
        {"arguments": {k: str(v) for k, v in vars(args).items()}, "runs": runs, "medians": medians}
        | {"machine": machine_description()},
    )


if __name__ == "__main__":
    main()
