"""Elastic resume, checked for real: a 2-process run stopped and resumed on 1 and on 4.

    python -m bench.elastic                          # out/demo/shards, stop at 3 of 6 steps
    python -m bench.elastic --shards DIR --stop 5 --steps 10

`bertkit train` under torchrun on Gloo (CPU), global batch 64 (micro-batch 16, a tiny
model, --shuffle-buffer 256 so the steps cross a window): the uninterrupted 2-process run
(1 loader worker each), the same run stopped after step --stop, and two copies of the
stopped run resumed with --resume on 1 process (4 micro-batches a step, 2 loader workers)
and on 4 (1 a step, no workers). Every rank records the sample keys of each micro-batch it
reads (BERTKIT_RECORD_KEYS, trainer/data.py); a global batch's keys are its micro-batches
concatenated in (accumulation step, rank) order. The table says, per resumed run, how many
global batches and keys after the stop it read and whether they equal the uninterrupted
run's, key by key. Exit 1 unless every row matches. The figure's code is
tests/support/elastic.py, which tests/test_elastic.py runs on the real sample.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import shutil
import sys
import tempfile
from pathlib import Path

from bench.measure import DEMO_OUTPUT, argument_parser, print_table
from tests.support.elastic import Comparison, elastic_figure


def table_rows(results: list[Comparison], stop: int) -> list[list[str]]:
    """One row per resumed run: from 2 processes to its own, what it read after `stop`."""
    return [
        [
            f"2 → {r.processes}",
            f"{r.processes} × {r.accumulation}",
            str(r.workers),
            f"{stop + 1}–{stop + r.batches}",
            f"{r.keys:,}",
            "yes" if r.equal else "NO",
            f"{r.seconds:.1f}",
        ]
        for r in results
    ]


HEADERS = [
    "resumed",
    "processes × accumulation",
    "workers",
    "steps compared",
    "keys",
    "same as uninterrupted",
    "resume s",
]


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.elastic", __doc__)
    parser.add_argument("--shards", type=Path, default=DEMO_OUTPUT / "shards")
    parser.add_argument("--stop", type=int, default=3, help="the step the first run stops at")
    parser.add_argument("--steps", type=int, default=6, help="--max-steps of every run")
    args = parser.parse_args(argv)
    if not (args.shards / "manifest.json").exists():
        print(f"no shards at {args.shards}: run `bertkit demo`, or give --shards DIR")
        return 2
    if not 0 < args.stop < args.steps:
        parser.error("--stop must be between 0 and --steps")
    workdir = Path(tempfile.mkdtemp(prefix="bertkit-elastic-"))
    try:
        results = elastic_figure(args.shards.resolve(), workdir, args.stop, args.steps)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{args.shards}: 2 processes stopped after step {args.stop} of {args.steps}, global "
        "batch 64 (micro-batch 16), resumed on 1 and on 4"
    )
    print_table(HEADERS, table_rows(results, args.stop))
    return 0 if all(r.equal for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
