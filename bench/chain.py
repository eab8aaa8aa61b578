"""`bertkit chain` against the four commands it replaces, side by side, and their bytes.

    python -m bench.chain                        # the sample (the demo's flags), 3 repeats
    python -m bench.chain --dump-copies 10       # the sample's dump ×10 (57.5 MB of wikitext)
    python -m bench.chain --workers 2            # both with two local worker processes

Run from the repository root. On each repeat, interleaved: `bertkit chain` in one fresh
process, then `bertkit wikipedia`, `books`, `vocab` and `examples` as four fresh processes,
one after the other, as a user runs them, each with the same flags and into the same
--output paths (a manifest records its paths). Wall and CPU (user+sys of the whole process
tree, bench.measure) are summed over the four; the medians and the chain ÷ four ratios are
printed. What the chain saves is what each command pays again: Python's start, importing
Beam and the stage, starting the runner and its workers, loading the vocabulary. Every
file of both outputs must be the same bytes, or the benchmark fails.
"""

from __future__ import annotations

import hashlib
import shutil
import statistics
from pathlib import Path

from bench.measure import (
    DEFAULT_WORKDIR,
    REPO_ROOT,
    RunMeasurement,
    argument_parser,
    machine_description,
    measure_command,
    print_table,
    repo_python,
    tail_of,
    write_results,
)
from bench.scale_dump import build_scaled_dump, find_sample_dump

SAMPLE_WIKITEXT_MB = 5.75  # the sample dump's wikitext (bench.scale_dump)
EXAMPLE_FLAGS = ["--max-seq-length", "128", "--dupe-factor", "5", "--heldout-fraction", "0.05"]
EXAMPLE_FLAGS += ["--samples-per-shard", "10000"]


def commands(dump: str, books: str, out: Path, workers: list[str]) -> dict[str, list[str]]:
    """The chain, and the four commands with the same flags and paths."""
    wiki, book = str(out / "documents" / "wikipedia"), str(out / "documents" / "books")
    vocab, shards = str(out / "vocab"), str(out / "shards")
    python = [repo_python(), "-m", "bertkit"]
    return {
        "chain": [
            *python,
            "chain",
            "--wikipedia",
            dump,
            "--books",
            books,
            "--output",
            str(out),
            "--vocab-size",
            "8000",
            *EXAMPLE_FLAGS,
            *workers,
        ],
        "wikipedia": [*python, "wikipedia", "--input", dump, "--output", wiki, *workers],
        "books": [*python, "books", "--input", books, "--output", book, *workers],
        "vocab": [
            *python,
            "vocab",
            "--documents",
            wiki,
            book,
            "--output",
            vocab,
            "--vocab-size",
            "8000",
            *workers,
        ],
        "examples": [
            *python,
            "examples",
            "--documents",
            wiki,
            book,
            "--vocab",
            vocab,
            "--output",
            shards,
            *EXAMPLE_FLAGS,
            *workers,
        ],
    }


def file_digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def measured(command: list[str], log: Path) -> RunMeasurement:
    run = measure_command(command, REPO_ROOT, log, 3600)
    if not run.ok:
        raise SystemExit(f"{' '.join(command[2:4])} failed:\n{tail_of(log)}")
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argument_parser("bench.chain", __doc__)
    parser.add_argument("--dump-copies", type=int, default=1, help="the sample dump × N")
    parser.add_argument("--workers", type=int, default=0, help="local worker processes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR / "chain")
    args = parser.parse_args(argv)
    dump = str(find_sample_dump())
    if args.dump_copies > 1:
        target = SAMPLE_WIKITEXT_MB * args.dump_copies
        dump = build_scaled_dump(target, args.workdir / "dumps", multistream=True, jobs=2).path
    books = str(REPO_ROOT / "data" / "books" / "*.txt")
    workers = []
    if args.workers:
        workers = ["--direct_num_workers", str(args.workers)]
        workers += ["--direct_running_mode", "multi_processing"]
    out = args.workdir / "out"
    steps = commands(dump, books, out, workers)
    chain_runs: list[RunMeasurement] = []
    four_runs: list[list[RunMeasurement]] = []
    for repeat in range(args.repeats):
        shutil.rmtree(out, ignore_errors=True)
        logs = args.workdir / "logs" / f"{repeat}"
        chain_runs.append(measured(steps["chain"], logs / "chain.log"))
        by_chain = file_digests(out)
        shutil.rmtree(out)
        four_runs.append([measured(steps[name], logs / f"{name}.log") for name in list(steps)[1:]])
        by_commands = file_digests(out)
        if by_chain != by_commands:
            differ = sorted(set(by_chain.items()) ^ set(by_commands.items()))
            raise SystemExit(f"the chain's output differs from the four commands': {differ[:4]}")
        print(
            f"repeat {repeat + 1}: chain {chain_runs[-1].cpu_s:.2f} CPU-s, four commands "
            f"{sum(r.cpu_s for r in four_runs[-1]):.2f} CPU-s; {len(by_chain)} files, same bytes"
        )
    rows, figures = [], {}
    for name, runs in (("chain", [[r] for r in chain_runs]), ("four commands", four_runs)):
        wall = statistics.median(sum(r.wall_s for r in group) for group in runs)
        cpu = statistics.median(sum(r.cpu_s for r in group) for group in runs)
        peak = max(r.peak_rss_mib for group in runs for r in group)
        figures[name] = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak}
        rows.append([name, f"{wall:.2f}", f"{cpu:.2f}", f"{peak:.0f}"])
    for index, name in enumerate(list(steps)[1:]):
        cpu = statistics.median(group[index].cpu_s for group in four_runs)
        wall = statistics.median(group[index].wall_s for group in four_runs)
        rows.append([f"  {name}", f"{wall:.2f}", f"{cpu:.2f}", ""])
    print_table(["run", "wall s", "CPU s", "peak RSS MiB"], rows)
    chain, four = figures["chain"], figures["four commands"]
    print(
        f"\nsample dump ×{args.dump_copies} + books, {args.workers or 'in-process'} workers, "
        f"median of {args.repeats}: the chain takes {chain['cpu_s'] / four['cpu_s']:.2f}× the "
        f"four commands' CPU and {chain['wall_s'] / four['wall_s']:.2f}× their wall time; "
        "every file the same bytes"
    )
    write_results(
        args.workdir / "results.json",
        {
            "dump": dump,
            "dump_copies": args.dump_copies,
            "workers": args.workers,
            "figures": figures,
            "machine": machine_description(),
        },
    )


if __name__ == "__main__":
    main()
