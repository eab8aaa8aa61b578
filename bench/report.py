"""How long `bertkit inspect --report` takes on the demo's data: the target is under 10 s.

    python -m bench.report                       # out/demo (built first if missing), 5 runs
    python -m bench.report --demo out/demo --repeats 3

Each run is a fresh process, `bertkit inspect DEMO/shards --report WORK/report.html`, timed
by bench.measure (wall, and CPU of the whole process tree): what a user waits for, Python's
start and every import included. The report reads the shards, the two documents directories
and the vocabulary the shards name; the demo's files are checked by sha256 to keep their
bytes. Prints every run and the medians. Not a test.
"""

from __future__ import annotations

import hashlib
import statistics
import subprocess
from pathlib import Path

from bench.measure import (
    DEFAULT_WORKDIR,
    DEMO_OUTPUT,
    REPO_ROOT,
    argument_parser,
    machine_description,
    measure_command,
    print_table,
    repo_python,
    tail_of,
    write_results,
)

TARGET_S = 10.0


def data_sha256(demo: Path) -> dict[str, str]:
    """sha256 of every file of the demo's documents, vocabulary and shards."""
    return {
        str(path.relative_to(demo)): hashlib.sha256(path.read_bytes()).hexdigest()
        for part in ("documents", "vocab", "shards")
        for path in sorted((demo / part).rglob("*"))
        if path.is_file()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argument_parser("bench.report", __doc__)
    parser.add_argument("--demo", type=Path, default=DEMO_OUTPUT, help="the demo's output")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR / "report")
    args = parser.parse_args(argv)
    if not (args.demo / "shards" / "manifest.json").exists():
        print(f"building the demo's data: bertkit demo --output {args.demo} --train-steps 0")
        build = ["bertkit", "demo", "--output", str(args.demo), "--train-steps", "0"]
        subprocess.run(
            [repo_python(), "-m", *build],
            cwd=REPO_ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    before = data_sha256(args.demo)
    out = args.workdir / "report.html"
    command = [repo_python(), "-m", "bertkit", "inspect", str(args.demo / "shards")]
    runs = []
    for number in range(args.repeats):
        log = args.workdir / f"run-{number}.log"
        run = measure_command([*command, "--report", str(out)], REPO_ROOT, log, 120)
        if run.returncode != 0:
            raise SystemExit(f"bertkit inspect --report failed:\n{tail_of(log)}")
        runs.append(run)
    if data_sha256(args.demo) != before:
        raise SystemExit(f"{args.demo}: the report changed the demo's data files")
    print_table(
        ["run", "wall s", "CPU s", "peak RSS MiB"],
        [
            [str(i + 1), f"{r.wall_s:.2f}", f"{r.cpu_s:.2f}", f"{r.peak_rss_mib:.0f}"]
            for i, r in enumerate(runs)
        ],
    )
    wall = statistics.median(r.wall_s for r in runs)
    cpu = statistics.median(r.cpu_s for r in runs)
    verdict = "met" if wall < TARGET_S else "NOT met"
    print(
        f"\nreport of {args.demo}: median {wall:.2f} s wall, {cpu:.2f} s CPU over {len(runs)} "
        f"runs ({out.stat().st_size / 1e3:,.0f} kB); target < {TARGET_S:.0f} s: {verdict}; "
        "the demo's data kept its bytes"
    )
    write_results(
        args.workdir / "results.json",
        {
            "command": [*command, "--report", str(out)],
            "wall_s": [r.wall_s for r in runs],
            "cpu_s": [r.cpu_s for r in runs],
            "median_wall_s": wall,
            "median_cpu_s": cpu,
            "page_bytes": out.stat().st_size,
            "machine": machine_description(),
        },
    )


if __name__ == "__main__":
    main()
