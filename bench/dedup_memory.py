"""Peak memory of `bertkit dedup` against the number of documents it reads.

    python -m bench.dedup_memory                        # 100,000 and 200,000 documents
    python -m bench.dedup_memory --counts 10000 30000

Run from the repository root. For each count N, one documents directory of N one-word
documents (`w0` … `wN-1`, all distinct, so nothing is removed and every document goes
through every step) is written once in WORKDIR/out/dedup_memory/N, then `python -m
pipelines.dedup` runs on it in a fresh process tree, at its defaults, on the local runner
(bench.measure: the peak RSS of its largest process). Printed: each count's peak RSS, and
the growth per document between consecutive counts. Targets: at most 1 GiB at 200,000
documents and at most 1 KB a document from 100,000 to 200,000.
"""

from __future__ import annotations

# First: without the dev extra, one line naming the install command (bench/dev_extra.py).
import bench.dev_extra  # noqa: F401

# isort: split
import shutil
import sys
from pathlib import Path

from bench.measure import (
    DEFAULT_WORKDIR,
    argument_parser,
    measure_command,
    print_table,
    repo_python,
    tail_of,
)
from tests.support.one_word_documents import write_one_word_documents


def peak_rss_mib(documents: Path, output: Path, log: Path, timeout_s: float = 3600) -> float:
    """The peak RSS (MiB) of `bertkit dedup` on `documents`, in a fresh process tree."""
    shutil.rmtree(output, ignore_errors=True)
    command = [repo_python(), "-m", "pipelines.dedup", "--documents", str(documents)]
    run = measure_command([*command, "--output", str(output)], Path.cwd(), log, timeout_s=timeout_s)
    if run.returncode != 0:
        raise SystemExit(f"bertkit dedup failed ({run.returncode}):\n{tail_of(log)}")
    return run.peak_rss_mib


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.dedup_memory", __doc__)
    parser.add_argument("--counts", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    root = args.workdir / "out" / "dedup_memory"
    rows, previous = [], None
    for count in args.counts:
        documents = write_one_word_documents(root / str(count), count)
        mib = peak_rss_mib(documents, root / f"{count}-out", root / f"{count}.log")
        growth = (
            f"{(mib - previous[1]) * 1024 * 1024 / (count - previous[0]) / 1000:.2f}"
            if previous
            else "-"
        )
        rows.append([f"{count:,}", f"{mib:.0f}", growth])
        previous = (count, mib)
    print_table(["documents", "peak RSS MiB", "KB per document since the previous"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
