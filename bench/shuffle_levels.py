"""`bertkit examples` with its regroupings on one level and on two, side by side.

    python -m bench.shuffle_levels --size-mb 25 --repeats 3

Scales the sample's documents to SIZE MB (bench.scale_documents), trains one vocabulary,
then runs the examples stage with `--shuffle-levels 1` and `--shuffle-levels 2`,
interleaved, with small partitions and buckets (--unit-mb, default 1) so that each
regrouping has the many keys a large corpus has. Prints, per setting, the medians of CPU
seconds, wall seconds and peak RSS, the spill files written (counted in the run's _work/
as it goes), and checks that both settings wrote the same shards and manifest, byte for
byte. What two levels cost is the CPU of the data's second pass; what they save is files
(on object storage: requests, see bench/scale_cost.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

from bench import runs, scale_documents
from bench.examples_vocab import vocab_command
from bench.measure import (
    DEFAULT_WORKDIR,
    argument_parser,
    measure_command,
    print_table,
    repo_python,
)


class SpillCounter(threading.Thread):
    """Counts the distinct spill files that appear under a run's _work/ while it runs."""

    def __init__(self, work: Path) -> None:
        super().__init__(daemon=True)
        self._work = work
        self.seen: set[str] = set()
        self._stop_flag = threading.Event()

    def run(self) -> None:
        while not self._stop_flag.is_set():
            # _work/ may not exist yet, or be being removed as the stage ends.
            with contextlib.suppress(FileNotFoundError):
                self.seen.update(str(p) for p in self._work.rglob("*.bin"))
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop_flag.set()
        self.join()
        return len(self.seen)


def digest(output: Path) -> str:
    """One sha256 over every file of an output tree, names and bytes."""
    hasher = hashlib.sha256()
    for path in sorted(p for p in output.rglob("*") if p.is_file()):
        hasher.update(path.relative_to(output).as_posix().encode() + b"\0" + path.read_bytes())
    return hasher.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser("bench.shuffle_levels", __doc__)
    parser.add_argument("--size-mb", type=float, default=25.0, help="documents text to build")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--unit-mb", type=int, default=1, help="--work-partition-mb and --bucket-mb of the runs"
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    runs.build_in_child(
        "bench.scale_documents", "--target-mb", f"{args.size_mb:g}", "--workdir", str(args.workdir)
    )
    documents = scale_documents.load_scaled_info(args.size_mb, args.workdir)
    vocab = runs.output_dir(args.workdir, "shuffle_levels", "vocab", args.size_mb)
    if not (vocab / "vocab.json").exists():
        run = runs.run_fresh(
            vocab_command(documents, vocab),
            Path.cwd(),
            vocab,
            runs.log_path(args.workdir, "shuffle_levels", "vocab", 1),
            3600,
        )
        if not run.ok:
            print(runs.failure(run), file=sys.stderr)
            return 1
    figures: dict[str, list] = {"1": [], "2": []}
    files: dict[str, list[int]] = {"1": [], "2": []}
    digests: dict[str, set[str]] = {"1": set(), "2": set()}
    for repeat in range(1, args.repeats + 1):
        for levels in ("1", "2"):
            label = f"levels{levels}"
            output = runs.output_dir(args.workdir, "shuffle_levels", label, args.size_mb)
            command = [
                repo_python(),
                "-m",
                "pipelines.examples",
                "--documents",
                *documents.directories,
                "--vocab",
                str(vocab),
                "--output",
                str(output),
                "--work-partition-mb",
                str(args.unit_mb),
                "--bucket-mb",
                str(args.unit_mb),
                "--shuffle-levels",
                levels,
            ]
            counter = SpillCounter(output / "_work")
            shutil.rmtree(output, ignore_errors=True)
            counter.start()
            log = runs.log_path(args.workdir, "shuffle_levels", f"levels{levels}", repeat)
            run = measure_command(command, Path.cwd(), log, 3600)
            files[levels].append(counter.stop())
            runs.print_run(
                f"  levels {levels}, repeat {repeat}: {run.cpu_s:.1f} CPU-s, {run.wall_s:.1f} s, "
                f"{run.peak_rss_mib:.0f} MiB, {files[levels][-1]:,} spill files seen",
                run,
            )
            if not run.ok:
                return 1
            figures[levels].append(run)
            digests[levels].add(digest(output))
    rows = []
    for levels in ("1", "2"):
        measured = figures[levels]
        rows.append(
            [
                f"--shuffle-levels {levels}",
                f"{statistics.median(r.cpu_s for r in measured):.1f}",
                f"{statistics.median(r.wall_s for r in measured):.1f}",
                f"{statistics.median(r.peak_rss_mib for r in measured):.0f}",
                f"{statistics.median(files[levels]):,.0f}",
            ]
        )
    print(
        f"\nbertkit examples on {documents.text_mb:.1f} MB of documents text, "
        f"--work-partition-mb/--bucket-mb {args.unit_mb} (medians of {args.repeats})"
    )
    print_table(["setting", "CPU-s", "wall s", "peak RSS MiB", "spill files"], rows)
    cpu = [statistics.median(r.cpu_s for r in figures[k]) for k in ("1", "2")]
    same = len(digests["1"] | digests["2"]) == 1
    ratio = statistics.median(files["2"]) / statistics.median(files["1"])
    print(
        f"two levels ÷ one: {cpu[1] / cpu[0]:.2f}x CPU-s, {ratio:.3f}x spill files; output "
        f"{'byte-identical' if same else 'DIFFERENT'} across settings and repeats"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
