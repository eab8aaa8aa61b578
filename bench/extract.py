"""Benchmark bertkit's Wikipedia extraction against WikiExtractor 3.1.0, side by side.

    python -m bench.extract --wikiextractor-python W --bertkit-core-python C   # the headline
    python -m bench.extract --install-into bench/.work  # the same, installing both there
    python -m bench.extract ... --sizes 12,25,100   # and RSS vs size
    python -m bench.extract ... --quick             # 12 MB only, one repeat
    python -m bench.extract --target-mb 12 --tools bertkit,floor --repeats 1
    python -m bench.extract --tools bertkit,bertkit-python-bz2,wikiextractor --repeats 5

W, C: the python of your environment with WikiExtractor 3.1.0, and of one with bertkit's core
install only (`pip install -c constraints.txt -e .`); the headline is the sample x10, 3
repeats. Run from the repository root. The sample dump (206 pages, 5.75 MB of wikitext) is scaled up
by repeating its pages with new ids and titles (bench.scale_dump) until it holds --target-mb
MB of wikitext; scaled dumps are cached in --workdir. The default, 57.5 MB, is the sample
exactly 10 times (the last page of the 10th copy crosses it; 17 MB of bz2). On each dump,
every tool runs in a fresh child process --repeats times, one run of each tool in turn (a
change in the machine's load then falls on all tools alike), each once the files the run
before it wrote are flushed to disk and after a 1 s pause (bench.runs.settle), and the
median is reported:

  bertkit        python -m pipelines.wikipedia --input DUMP --output DIR  (FnApiRunner, in process),
                 installed as a user of the stages installs it: `pip install -c constraints.txt
                 -e .` (the core install; the README's adds the trainer's `train` extra, which
                 this stage never imports) in an environment of its own: --bertkit-core-python
                 names its python (or --install-into DIR makes DIR/bertkit-venv)
  bertkit-dev    the same, from the project's development venv
                 (.venv, every extra): with the `gcp` and `aws` extras installed, importing Beam
                 imports their cloud clients too (BigQuery, Pub/Sub, GCS, S3) at start-up
  wikiextractor  WikiExtractor 3.1.0 from your install (never a project dependency):
                 --wikiextractor-python names a python with `pip install wikiextractor==3.1.0`
                 done (or --install-into DIR makes DIR/wikiextractor-venv); `--processes 1`: it
                 still forks one extract worker and one writer
  floor          Python's bz2 decompression of the same dump: no extractor can beat it
                 with Python's decoder
  reader         bertkit's own reader of the dump (pipelines.io.compressed, indexed_bzip2's
                 decoder): the floor under bertkit's extraction
  bertkit-python-bz2  (only when --tools names it) bertkit with Python's bz2 decoder in
                 place of indexed_bzip2's: the reader's choice measured in the same run

Both tools run from byte-compiled modules: pip compiled WikiExtractor's when it installed
it, and the bench compiles bertkit's packages first (bench.measure.byte_compile_bertkit),
as its first run would on a machine that does not set PYTHONDONTWRITEBYTECODE.

CPU time is user+sys of the child and all the descendants it waited for (os.wait4), checked
against a /proc poll (every 50 ms) of the whole process tree (bench.measure), which gives each
process's peak RSS (VmHWM): "peak RSS" is the largest process, "tree RSS" the sum of all
processes' peaks (an upper bound: pages shared after fork are counted in every process).
Throughput is MB (10^6 bytes) of unescaped wikitext in the dump per CPU-second (= per core)
and per wall-second.

Text quality is compared on both tools' outputs for the --target-mb dump (bench.extract_quality):
documents, output MB, and per MB of output: empty parentheses, leftover wiki/HTML markup,
markup-like line starts, "number + unit" mentions, and the share of {{convert|N|...}} whose
N reaches the output of the same article. Each tool's latest output is kept in
WORKDIR/out/extract/, every run's log in WORKDIR/logs/extract/; the results go to
WORKDIR/extract-results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import measure, runs, scale_dump, venvs
from bench.extract_quality import (
    QualityReport,
    bertkit_output_layout,
    print_quality_table,
    quality_reports,
)
from bench.extract_tools import (
    BERTKIT_CORE,
    EXTRACTORS,
    FLOORS,
    OPT_IN_TOOLS,
    TOOLS,
    WIKIEXTRACTOR,
    WIKIEXTRACTOR_VERSION,
    RunSettings,
    tool_command,
)
from bench.measure import (
    DEFAULT_WORKDIR,
    MB,
    RunMeasurement,
    fmt,
    importlib_version,
    print_table,
)
from bench.scale_dump import ScaledDumpInfo

COMMAND = "python -m bench.extract"

BENCHMARK = "extract"  # outputs and logs go to WORKDIR/{out,logs}/extract/
TARGET_RATIO = 2.0  # bertkit must extract >= 2x WikiExtractor's MB per CPU-second
SAMPLE_X10_MB = 57.5  # the sample's 5.752 MB of wikitext, 10 times: the headline


def output_dir(workdir: Path, tool: str, size_mb: float) -> Path:
    return runs.output_dir(workdir, BENCHMARK, tool, size_mb)


def run_tools_interleaved(
    tools: list[str],
    dump: ScaledDumpInfo,
    repeats: int,
    settings: RunSettings,
) -> dict[str, list[RunMeasurement]]:
    """Run every tool ``repeats`` times, one run of each in turn (so a change in the
    machine's load falls on all of them alike), each on a fresh output directory, whose last
    output is kept. The order turns by one tool each round, so that no tool always runs
    right after the same one. A tool that fails is not run again: it would fail again."""
    measured: dict[str, list[RunMeasurement]] = {tool: [] for tool in tools}
    for repeat in range(1, repeats + 1):
        turn = (repeat - 1) % len(tools)
        for tool in tools[turn:] + tools[:turn]:
            if measured[tool] and not measured[tool][-1].ok:
                continue
            output = output_dir(settings.workdir, tool, dump.target_mb)
            spec = tool_command(tool, Path(dump.path), output, settings)
            label = f"{tool}-{dump.target_mb:g}mb"
            run = runs.run_fresh(
                spec.command,
                spec.cwd,
                output,
                runs.log_path(settings.workdir, BENCHMARK, label, repeat),
                settings.timeout_s,
                create_output=tool == "wikiextractor",  # it writes into an existing directory
            )
            measured[tool].append(run)
            line = f"  {tool:<13} {dump.target_mb:>5g} MB  run {repeat}/{repeats}: "
            runs.print_run(line + describe_run(run, dump), run)
    return measured


def describe_run(run: RunMeasurement, dump: ScaledDumpInfo) -> str:
    return runs.failure(run) or (
        f"wall {run.wall_s:6.1f} s  cpu {run.cpu_s:6.1f} s "
        f"(rusage {run.cpu_rusage_s:.1f}, /proc {run.cpu_polled_s:.1f}, "
        f"{run.processes} proc)  {dump.wikitext_mb / run.cpu_s:5.2f} MB/CPU-s  "
        f"peak {run.peak_rss_mib:6.0f} MiB  tree {run.tree_rss_mib:6.0f} MiB"
    )


@dataclass(frozen=True)
class ToolSummary:
    """Medians over the successful repeats of one tool on one dump."""

    tool: str
    size_mb: float
    ok: bool
    repeats: int
    wall_s: float | None = None
    cpu_s: float | None = None
    mb_per_cpu_s: float | None = None
    mb_per_wall_s: float | None = None
    peak_rss_mib: float | None = None
    tree_rss_mib: float | None = None
    xml_mb: float | None = None  # floors only: decompressed size of the dump
    decompress_cpu_s: float | None = None  # reader only: median CPU-s of the decompression
    runs: list[dict[str, Any]] = field(default_factory=list)


def summarise_runs(tool: str, dump: ScaledDumpInfo, measured: list[RunMeasurement]) -> ToolSummary:
    raw = [asdict(run) for run in measured]
    if not measured or not all(run.ok for run in measured):
        return ToolSummary(tool, dump.target_mb, ok=False, repeats=len(measured), runs=raw)
    medians = runs.median_figures(measured)
    return ToolSummary(
        tool,
        dump.target_mb,
        ok=True,
        repeats=len(measured),
        **medians,
        mb_per_cpu_s=dump.wikitext_mb / medians["cpu_s"],
        mb_per_wall_s=dump.wikitext_mb / medians["wall_s"],
        xml_mb=decompressed_xml_mb(measured[-1]) if tool in FLOORS else None,
        decompress_cpu_s=(
            statistics.median(float(Path(run.log).read_text().split()[-2]) for run in measured)
            if tool == "reader"
            else None
        ),
        runs=raw,
    )


def decompressed_xml_mb(floor_run: RunMeasurement) -> float:
    """A floor prints the decompressed XML size as its only output."""
    return int(Path(floor_run.log).read_text().split()[-1]) / MB


# --------------------------------------------------------------------------------------
# Reporting


def print_rss_table(summaries: dict[float, dict[str, ToolSummary]], tools: list[str]) -> None:
    print("\nPeak RSS vs input size (median of repeats; max process / sum over the tree)")
    headers = ["wikitext MB"] + [
        f"{tool} {what}"
        for tool in tools
        if tool not in FLOORS
        for what in ("MB/CPU-s", "peak MiB", "tree MiB")
    ]
    rows = []
    for size, by_tool in sorted(summaries.items()):
        row = [f"{size:g}"]
        for tool in tools:
            if tool in FLOORS:
                continue
            summary = by_tool.get(tool)
            row += [
                fmt(summary and summary.mb_per_cpu_s, ".2f"),
                fmt(summary and summary.peak_rss_mib, ".0f"),
                fmt(summary and summary.tree_rss_mib, ".0f"),
            ]
        rows.append(row)
    print_table(headers, rows)


def print_final_table(by_tool: dict[str, ToolSummary], dump: ScaledDumpInfo) -> None:
    print(
        f"\nThroughput on {dump.wikitext_mb:.2f} MB of wikitext (the sample x{dump.copies:.2f}, "
        f"{dump.compressed_bytes / MB:.1f} MB of bz2; median of repeats)"
    )
    reference = by_tool.get("wikiextractor")
    rows = []
    for tool, summary in by_tool.items():
        ratio = (
            summary.mb_per_cpu_s / reference.mb_per_cpu_s
            if summary.ok and reference and reference.ok
            else None
        )
        rows.append(
            [
                tool,
                fmt(summary.cpu_s, ".2f"),
                fmt(summary.mb_per_cpu_s, ".2f"),
                fmt(summary.mb_per_wall_s, ".2f"),
                f"{fmt(summary.peak_rss_mib, '.0f')} / {fmt(summary.tree_rss_mib, '.0f')}",
                fmt(ratio, ".2f") + ("x" if ratio is not None else ""),
            ]
        )
    print_table(
        [
            "tool",
            "CPU-s",
            "MB/CPU-s",
            "wall MB/s",
            "peak RSS MiB (max/tree)",
            "vs WikiExtractor per core",
        ],
        rows,
    )
    floor = by_tool.get("floor")
    if floor and floor.ok and floor.xml_mb and floor.cpu_s:
        print(
            f"floor: Python's bz2 decompresses the {floor.xml_mb:.1f} MB of XML at "
            f"{floor.xml_mb / floor.cpu_s:.1f} MB/CPU-s (XML bytes, not wikitext)"
        )
    reader = by_tool.get("reader")
    if reader and reader.ok and reader.xml_mb and reader.decompress_cpu_s:
        print(
            f"reader: bertkit's reader decompresses it in {reader.decompress_cpu_s:.2f} CPU-s, "
            f"{reader.xml_mb / reader.decompress_cpu_s:.1f} MB/CPU-s (its imports not counted)"
        )
    print(f"target: bertkit ≥ {TARGET_RATIO}× WikiExtractor per core -> {verdict(by_tool)}")


def per_core_ratio(by_tool: dict[str, ToolSummary], tool: str = "bertkit") -> float | None:
    bertkit, wikiextractor = by_tool.get(tool), by_tool.get("wikiextractor")
    if bertkit and wikiextractor and bertkit.ok and wikiextractor.ok:
        return bertkit.mb_per_cpu_s / wikiextractor.mb_per_cpu_s  # type: ignore[operator]
    return None


def verdict(by_tool: dict[str, ToolSummary]) -> str:
    ratio = per_core_ratio(by_tool)
    if ratio is None:
        return "not measured (bertkit or WikiExtractor did not run successfully)"
    said = f"{'MET' if ratio >= TARGET_RATIO else 'NOT MET'} ({ratio:.2f}×"
    dev = per_core_ratio(by_tool, "bertkit-dev")
    if dev is not None:  # said beside it: the same code with the cloud extras installed
        said += f"; {dev:.2f}× from the development venv, cloud extras installed"
    return said + ")"


# --------------------------------------------------------------------------------------
# Main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = measure.argument_parser("bench.extract", __doc__)
    parser.add_argument(
        "--target-mb",
        type=float,
        default=SAMPLE_X10_MB,
        help=f"wikitext MB of the headline and quality run (default {SAMPLE_X10_MB:g}: the "
        "sample 10 times)",
    )
    parser.add_argument(
        "--sizes",
        type=runs.parse_sizes,
        default=[],
        help="comma-separated extra wikitext MB sizes for the RSS-vs-size "
        "table, e.g. 12,25,50,100 (default: only --target-mb)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="fresh-process runs per tool and size; the median is reported",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: --target-mb 12 --sizes 12 --repeats 1"
    )
    parser.add_argument(
        "--tools",
        default=",".join(TOOLS),
        help=f"comma-separated subset of {','.join(TOOLS + OPT_IN_TOOLS)} (default: "
        f"{','.join(TOOLS)})",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="cache for scaled dumps, the WikiExtractor venv, outputs, logs",
    )
    parser.add_argument(
        "--bertkit-arg",
        action="append",
        default=[],
        dest="bertkit_args",
        help="extra argument for the bertkit command, repeatable; write options as "
        "--bertkit-arg=--flag=value",
    )
    parser.add_argument(
        "--bertkit-module",
        default="pipelines.wikipedia",
        help="module run as `python -m MODULE --input DUMP --output DIR` from the repository "
        "root (default pipelines.wikipedia; another module lets you compare variants)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds before a single run is killed (default 3600)",
    )
    venvs.add_tool_arguments(parser, WIKIEXTRACTOR, BERTKIT_CORE)
    args = parser.parse_args(argv)
    if args.quick:
        args.target_mb, args.sizes, args.repeats = 12.0, [12.0], 1
    args.tools = [tool for tool in args.tools.split(",") if tool]
    unknown = set(args.tools) - set(TOOLS + OPT_IN_TOOLS)
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    args.workdir = args.workdir.resolve()
    return args


def prepare_scaled_dump(size_mb: float, workdir: Path) -> ScaledDumpInfo:
    """Build (or reuse) a scaled dump in a child process.

    Building holds the sample dump in memory; doing it here would raise this process's
    high-water RSS, which every tool it launches then inherits in its ru_maxrss.
    """
    runs.build_in_child(
        "bench.scale_dump", "--target-mb", f"{size_mb:g}", "--workdir", str(workdir)
    )
    dump_path, info_path = scale_dump.scaled_dump_paths(workdir, size_mb)
    info = scale_dump.load_cached_info(dump_path, info_path, size_mb, scale_dump.find_sample_dump())
    if info is None:
        raise RuntimeError(f"bench.scale_dump did not leave a usable {dump_path}")
    return info


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sorted(set(args.sizes) | {args.target_mb})
    wikiextractor_python = bertkit_core_python = ""
    if "wikiextractor" in args.tools:
        wikiextractor_python = venvs.tool_python(
            COMMAND, WIKIEXTRACTOR, args.wikiextractor_python, args.install_into
        )
    if {"bertkit", "bertkit-python-bz2"} & set(args.tools):
        bertkit_core_python = venvs.tool_python(
            COMMAND, BERTKIT_CORE, args.bertkit_core_python, args.install_into
        )
    measure.byte_compile_bertkit()  # WikiExtractor's venv holds its .pyc files: so must we
    dumps = {size: prepare_scaled_dump(size, args.workdir) for size in sizes}
    settings = RunSettings(
        workdir=args.workdir,
        timeout_s=args.timeout,
        bertkit_module=args.bertkit_module,
        bertkit_args=tuple(args.bertkit_args),
        wikiextractor_python=wikiextractor_python,
        bertkit_core_python=bertkit_core_python,
    )
    summaries: dict[float, dict[str, ToolSummary]] = {}
    for size in sizes:
        # The floors are only context for the headline size; RSS-vs-size is about extractors.
        tools = [t for t in args.tools if t not in FLOORS or size == args.target_mb]
        measured = run_tools_interleaved(tools, dumps[size], args.repeats, settings)
        summaries[size] = {
            tool: summarise_runs(tool, dumps[size], measured[tool]) for tool in tools
        }

    extracted = {
        tool: output_dir(args.workdir, tool, args.target_mb)
        for tool in EXTRACTORS
        if tool in args.tools and summaries[args.target_mb][tool].ok
    }
    quality = quality_reports(extracted, dumps[args.target_mb])

    if len(sizes) > 1:
        print_rss_table(summaries, args.tools)
    if quality:
        print_quality_table(quality)
    print_final_table(summaries[args.target_mb], dumps[args.target_mb])
    write_results(args, dumps, summaries, quality)
    return 0 if all(s.ok for by_tool in summaries.values() for s in by_tool.values()) else 1


def read_bertkit_manifest(workdir: Path, size_mb: float) -> dict[str, Any] | None:
    """The counts and drop reasons bertkit recorded, to explain document-count differences."""
    path = output_dir(workdir, "bertkit", size_mb) / bertkit_output_layout()[1]
    if not path.exists():
        return None
    manifest = json.loads(path.read_text())
    return {key: manifest.get(key) for key in ("counts", "dropped", "rejected", "failed_inputs")}


def write_results(
    args: argparse.Namespace,
    dumps: dict[float, ScaledDumpInfo],
    summaries: dict[float, dict[str, ToolSummary]],
    quality: dict[str, QualityReport],
) -> None:
    results = {
        "machine": measure.machine_description(
            beam=importlib_version("apache-beam"), wikiextractor=WIKIEXTRACTOR_VERSION
        ),
        "config": {
            "target_mb": args.target_mb,
            "sizes": sorted(dumps),
            "repeats": args.repeats,
            "tools": args.tools,
            "bertkit_module": args.bertkit_module,
            "bertkit_args": args.bertkit_args,
            "mb": MB,
        },
        "dumps": {f"{size:g}": asdict(dump) for size, dump in dumps.items()},
        "results": {
            f"{size:g}": {tool: asdict(s) for tool, s in by_tool.items()}
            for size, by_tool in summaries.items()
        },
        "quality": {tool: report.to_json() for tool, report in quality.items()},
        "bertkit_manifest": read_bertkit_manifest(args.workdir, args.target_mb),
        "target": {
            "ratio_required": TARGET_RATIO,
            "ratio_measured": per_core_ratio(summaries[args.target_mb]),
            "verdict": verdict(summaries[args.target_mb]),
        },
    }
    measure.write_results(args.workdir / "extract-results.json", results)


if __name__ == "__main__":
    sys.exit(main())
