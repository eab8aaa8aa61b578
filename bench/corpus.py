"""Benchmark `bertkit corpus`: its JSON lines reading rate, and its memory as the input grows.

    python -m bench.corpus                      # the quick run: 50 MB parse, 100 MB stage
    python -m bench.corpus --sizes 100,1000     # peak RSS at 100 MB and 1 GB side by side
    python -m bench.corpus --parse-mb 20 --repeats 5 --sizes 20

Run from the repository root. The input is JSON lines made from the real sample: the
paragraphs of data/books/*.txt (each reflowed to one line) drawn into records of 1-12
paragraphs (seeded, so every build is the same), each record shaped as FineWeb's
(`id`, `text`, `url`, `date`, `language`, `score`); built once per size in --workdir.

1. parse (in this process, one core): `pipelines.corpus.jsonl_documents` over --parse-mb MB
   of plain and of .zst JSON lines, every Document made, nothing written. Once with the
   sentence splitter replaced by one sentence a paragraph (the reading, JSON, field and
   paragraph path the stage adds; target: 20 MB of JSON lines per CPU-second), once with
   blingfire's, as the stage splits. CPU time by `time.process_time`, median of --repeats.
2. stage: `python -m pipelines.corpus --input X.jsonl.zst --output DIR` in a fresh child
   process (bench.measure: CPU time of the tree, peak RSS) per size in --sizes (MB of JSON
   lines), --stage-repeats times, medians; the RSS columns side by side show whether memory
   stays flat as the input grows (it should: files stream, a unit's writer holds one row
   group).

Results go to WORKDIR/corpus-results.json; every stage run's log to WORKDIR/logs/corpus/.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import measure, runs
from bench.measure import DEFAULT_WORKDIR, MB, REPO_ROOT, fmt, print_table, repo_python

BENCHMARK = "corpus"
TARGET_MB_PER_CPU_S = 20.0  # reading path, splitter stubbed
BOOKS = REPO_ROOT / "data" / "books"


# --------------------------------------------------------------------------------------
# The input: FineWeb-shaped records made of the sample's paragraphs


def sample_paragraphs() -> list[str]:
    """Every blank-line paragraph of the sample books, reflowed to one line."""
    paragraphs = []
    for path in sorted(BOOKS.glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        for block in text.split("\n\n"):
            line = " ".join(block.split())
            if line:
                paragraphs.append(line)
    return paragraphs


def records(seed: int = 0) -> Iterator[bytes]:
    """JSON lines, without end: records of 1-12 sample paragraphs, FineWeb's fields."""
    paragraphs = sample_paragraphs()
    rng = random.Random(seed)
    number = 0
    while True:
        start = rng.randrange(len(paragraphs))
        text = "\n\n".join(paragraphs[start : start + rng.randint(1, 12)])
        record = {
            "id": f"<urn:uuid:{rng.getrandbits(128):032x}>",
            "text": text,
            "url": f"https://example.org/{number}",
            "date": "2024-04-18T12:00:00Z",
            "language": "en",
            "score": round(rng.random(), 4),
        }
        yield (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        number += 1


def build_input(path: Path, target_mb: float) -> int:
    """Write at least `target_mb` MB of JSON lines to `path` (.zst compressed by suffix) once;
    return the JSON lines' size in bytes (kept beside it, so a rebuild is never needed)."""
    size_file = path.with_name(path.name + ".bytes")
    if path.exists() and size_file.exists():
        return int(size_file.read_text())
    import zstandard

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    written = 0
    with temporary.open("wb") as raw:
        sink: Any = raw
        if path.suffix == ".zst":
            sink = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
        buffer = io.BytesIO()
        for line in records():
            buffer.write(line)
            written += len(line)
            if buffer.tell() >= 1 << 20:
                sink.write(buffer.getvalue())
                buffer = io.BytesIO()
            if written >= target_mb * MB:
                break
        sink.write(buffer.getvalue())
        if sink is not raw:
            sink.close()
    temporary.rename(path)
    size_file.write_text(str(written))
    return written


def input_path(workdir: Path, size_mb: float, suffix: str) -> Path:
    return workdir / "corpus" / f"records-{size_mb:g}mb{suffix}"


# --------------------------------------------------------------------------------------
# 1. The reading path, in this process


def one_sentence(paragraph: str) -> list[str]:
    """The splitter's stand-in: the paragraph is one sentence."""
    return [paragraph]


def parse_cpu_s(path: Path, stub_splitter: bool) -> tuple[float, int]:
    """CPU seconds to read `path` into Documents (none written), and the documents made."""
    from pipelines.beam.documents import UnitTally
    from pipelines.books import reading as books_reading
    from pipelines.corpus import CorpusConfig, jsonl_documents
    from pipelines.io.storage import READER

    config = CorpusConfig(input=(str(path),), output="unused")
    real = books_reading.split_sentences
    books_reading.split_sentences = one_sentence if stub_splitter else real
    try:
        start = time.process_time()
        made = sum(1 for _ in jsonl_documents(str(path), path.name, config, UnitTally("0"), READER))
        return time.process_time() - start, made
    finally:
        books_reading.split_sentences = real


def measure_parse(workdir: Path, parse_mb: float, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for suffix in (".jsonl", ".jsonl.zst"):
        path = input_path(workdir, parse_mb, suffix)
        size = build_input(path, parse_mb)
        for stub in (True, False):
            times = []
            for _ in range(repeats):
                cpu_s, made = parse_cpu_s(path, stub)
                times.append(cpu_s)
            cpu_s = statistics.median(times)
            label = "stubbed" if stub else "blingfire"
            print(
                f"  parse {suffix:<10} splitter {label:<9}: {size / MB:6.1f} MB in "
                f"{cpu_s:5.2f} CPU-s (median of {repeats}) = {size / MB / cpu_s:5.1f} MB/CPU-s, "
                f"{made} documents",
                flush=True,
            )
            rows.append(
                {
                    "input": suffix,
                    "splitter": label,
                    "jsonl_mb": size / MB,
                    "cpu_s": cpu_s,
                    "cpu_s_runs": times,
                    "mb_per_cpu_s": size / MB / cpu_s,
                    "documents": made,
                }
            )
    return rows


# --------------------------------------------------------------------------------------
# 2. The stage, in a child process


def measure_stage(workdir: Path, size_mb: float, repeats: int, timeout_s: float) -> dict[str, Any]:
    path = input_path(workdir, size_mb, ".jsonl.zst")
    size = build_input(path, size_mb)
    output = runs.output_dir(workdir, BENCHMARK, "bertkit", size_mb)
    command = [repo_python(), "-m", "pipelines.corpus", "--input", str(path), "--output"]
    command.append(str(output))

    def attempt(repeat: int):
        log = runs.log_path(workdir, BENCHMARK, f"stage-{size_mb:g}mb", repeat)
        run = runs.run_fresh(command, REPO_ROOT, output, log, timeout_s)
        line = f"  stage {size_mb:>6g} MB  run {repeat}/{repeats}: " + (
            runs.failure(run)
            or f"wall {run.wall_s:6.1f} s  cpu {run.cpu_s:6.1f} s  "
            f"{size / MB / run.cpu_s:5.2f} MB/CPU-s  peak {run.peak_rss_mib:5.0f} MiB  "
            f"tree {run.tree_rss_mib:5.0f} MiB"
        )
        return run, line

    measured = runs.repeat_until_failure(repeats, attempt)
    result: dict[str, Any] = {"size_mb": size_mb, "jsonl_mb": size / MB, "zst_mb": None}
    result["zst_mb"] = path.stat().st_size / MB
    result["ok"] = bool(measured) and all(run.ok for run in measured)
    if result["ok"]:
        medians = runs.median_figures(measured)
        result.update(medians, mb_per_cpu_s=size / MB / medians["cpu_s"])
        manifest = json.loads((output / "_manifest.json").read_text())
        result["documents"] = manifest["counts"]["documents"]
    return result


# --------------------------------------------------------------------------------------
# Reporting and the command line


def parse_row(r: dict[str, Any]) -> list[str]:
    figures = (f"{r['jsonl_mb']:.1f}", f"{r['cpu_s']:.2f}", f"{r['mb_per_cpu_s']:.1f}")
    return [r["input"], r["splitter"], *figures]


def print_report(parse: list[dict[str, Any]], stage: list[dict[str, Any]]) -> None:
    print("\nReading path, in process, one core (median of repeats)")
    print_table(
        ["input", "splitter", "JSON lines MB", "CPU s", "MB/CPU-s"],
        [parse_row(r) for r in parse],
        left=(0, 1),
    )
    stubbed = [r["mb_per_cpu_s"] for r in parse if r["splitter"] == "stubbed"]
    if stubbed:
        met = min(stubbed) >= TARGET_MB_PER_CPU_S
        print(
            f"target ≥ {TARGET_MB_PER_CPU_S:g} MB/CPU-s without splitting: "
            f"{measure.verdict_word(True, met)} (slowest {min(stubbed):.1f})"
        )
    if not stage:
        return
    print("\nThe stage (python -m pipelines.corpus, .jsonl.zst in, median of repeats)")
    print_table(
        ["JSON lines MB", ".zst MB", "documents", "CPU s", "wall s", "MB/CPU-s", "peak RSS MiB"],
        [
            [
                f"{r['jsonl_mb']:.0f}",
                f"{r['zst_mb']:.0f}",
                str(r.get("documents", "n/a")),
                fmt(r.get("cpu_s"), ".1f"),
                fmt(r.get("wall_s"), ".1f"),
                fmt(r.get("mb_per_cpu_s"), ".2f"),
                fmt(r.get("peak_rss_mib"), ".0f"),
            ]
            for r in stage
        ],
        left=(),
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = measure.argument_parser("bench.corpus", __doc__)
    parser.add_argument("--parse-mb", type=float, default=50, help="MB for the parse rate")
    parser.add_argument("--repeats", type=int, default=3, help="parse runs per row")
    parser.add_argument(
        "--sizes", default="100", help="MB of JSON lines per stage run, comma-separated ('' none)"
    )
    parser.add_argument("--stage-repeats", type=int, default=1, help="stage runs per size")
    parser.add_argument("--timeout-s", type=float, default=3600, help="per stage run")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, on_row: Callable[[str], None] | None = None) -> int:
    args = parse_args(argv)
    print(f"bench.corpus: parse {args.parse_mb:g} MB, stage sizes {args.sizes or 'none'}")
    parse = measure_parse(args.workdir, args.parse_mb, args.repeats)
    sizes = runs.parse_sizes(args.sizes) if args.sizes else []
    stage = [measure_stage(args.workdir, s, args.stage_repeats, args.timeout_s) for s in sizes]
    print_report(parse, stage)
    measure.write_results(
        args.workdir / "corpus-results.json",
        {
            "args": {k: str(v) for k, v in vars(args).items()},
            "parse": parse,
            "stage": stage,
            "machine": measure.machine_description(
                zstandard=measure.importlib_version("zstandard"),
                pyarrow=measure.importlib_version("pyarrow"),
                apache_beam=measure.importlib_version("apache-beam"),
            ),
        },
    )
    return 0 if all(r["ok"] for r in stage) else 1


if __name__ == "__main__":
    sys.exit(main())
