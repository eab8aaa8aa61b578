"""Benchmark bertkit's Wikipedia extraction against WikiExtractor 3.1.0, side by side.

    python bench/extract.py --sizes 12,25,50        # full run: 50 MB headline + RSS vs size
    python bench/extract.py --quick                 # 12 MB only, one repeat

The sample dump (206 pages, 5.75 MB of wikitext) is scaled up by repeating its pages with
new ids and titles (see bench/scale_dump.py) until it holds --target-mb MB of wikitext;
scaled dumps are cached in --workdir. On each dump, every tool runs in a fresh child
process --repeats times and the median is reported:

  bertkit        python -m pipelines.wikipedia --input DUMP --output DIR  (DirectRunner)
  wikiextractor  WikiExtractor 3.1.0 from a throwaway venv in --workdir (never a project
                 dependency), `--processes 1`; it still forks one extract worker and one writer
  floor          Python's bz2 decompression of the same dump: no extractor can beat it

CPU time is user+sys of the child and all the descendants it waited for (os.wait4), checked
against a /proc poll (every 50 ms) of the whole process tree (bench/measure.py), which gives each
process's peak RSS (VmHWM): "peak RSS" is the largest process, "tree RSS" the sum of all
processes' peaks (an upper bound: pages shared after fork are counted in every process).
Throughput is MB (10^6 bytes) of unescaped wikitext in the dump per CPU-second (= per core)
and per wall-second.

Text quality is compared on both tools' outputs for the --target-mb dump: documents, output
MB, and per MB of output: empty parentheses, leftover wiki/HTML markup, markup-like line
starts, "number + unit" mentions, and the share of {{convert|N|...}} whose N reaches the
output of the same article. Results go to --workdir/extract-results.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import unescape

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `measure`, `scale_dump` as a script

import measure
import scale_dump
from measure import (
    RunMeasurement,
    fmt,
    importlib_version,
    indent,
    measure_command,
    print_table,
    repo_python,
    tail_of,
)
from scale_dump import MB, ScaledDumpInfo

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKDIR = REPO_ROOT / "bench" / ".work"
WIKIEXTRACTOR_VERSION = "3.1.0"
TARGET_RATIO = 1.5  # bertkit must extract >= 1.5x WikiExtractor's MB per CPU-second

TOOLS = ("bertkit", "wikiextractor", "floor")
EXTRACTORS = ("bertkit", "wikiextractor")

# Run as `python -c FLOOR_CODE DUMP`: decompress in 1 MiB chunks and print the XML size.
FLOOR_CODE = """
import bz2, sys
size = 0
with bz2.open(sys.argv[1], "rb") as dump:
    while chunk := dump.read(1 << 20):
        size += len(chunk)
print(size)
"""


# --------------------------------------------------------------------------------------
# The tools


def wikiextractor_python(workdir: Path) -> Path:
    return workdir / "wikiextractor-venv" / "bin" / "python"


def ensure_wikiextractor(workdir: Path) -> Path:
    """Install WikiExtractor into a throwaway venv (it must never be a project dependency)."""
    python = wikiextractor_python(workdir)
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('wikiextractor'))"]
    if python.exists():
        installed = subprocess.run(check, capture_output=True, text=True)
        if installed.stdout.strip() == WIKIEXTRACTOR_VERSION:
            return python
    print(
        f"installing wikiextractor=={WIKIEXTRACTOR_VERSION} into {python.parent.parent}", flush=True
    )
    base_python = shutil.which("python3.11") or sys.executable
    subprocess.run([base_python, "-m", "venv", str(python.parent.parent)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"wikiextractor=={WIKIEXTRACTOR_VERSION}"],
        check=True,
    )
    return python


@dataclass(frozen=True)
class RunSettings:
    """What every run of every tool shares."""

    workdir: Path
    timeout_s: float
    bertkit_module: str = "pipelines.wikipedia"
    bertkit_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolCommand:
    command: list[str]
    cwd: Path


def tool_command(tool: str, dump: Path, output_dir: Path, settings: RunSettings) -> ToolCommand:
    if tool == "bertkit":
        return ToolCommand(
            [
                repo_python(),
                "-m",
                settings.bertkit_module,
                "--input",
                str(dump),
                "--output",
                str(output_dir),
                *settings.bertkit_args,
            ],
            REPO_ROOT,
        )
    if tool == "wikiextractor":
        # -q: progress logging on stderr is not part of the work being compared.
        return ToolCommand(
            [
                str(wikiextractor_python(settings.workdir)),
                "-m",
                "wikiextractor.WikiExtractor",
                str(dump),
                "--processes",
                "1",
                "-o",
                str(output_dir),
                "-q",
            ],
            settings.workdir,
        )
    if tool == "floor":
        return ToolCommand([sys.executable, "-c", FLOOR_CODE, str(dump)], settings.workdir)
    raise ValueError(f"unknown tool {tool!r}")


def output_dir_for(workdir: Path, tool: str, size_mb: float) -> Path:
    return workdir / "out" / f"{tool}-{size_mb:g}mb"


def run_tool_repeatedly(
    tool: str,
    dump: ScaledDumpInfo,
    repeats: int,
    settings: RunSettings,
) -> list[RunMeasurement]:
    """Run one tool ``repeats`` times on a fresh output directory; the last output is kept."""
    output_dir = output_dir_for(settings.workdir, tool, dump.target_mb)
    runs = []
    for repeat in range(1, repeats + 1):
        shutil.rmtree(output_dir, ignore_errors=True)
        if tool == "wikiextractor":
            output_dir.mkdir(parents=True)
        spec = tool_command(tool, Path(dump.path), output_dir, settings)
        log_path = settings.workdir / "logs" / f"{tool}-{dump.target_mb:g}mb-r{repeat}.log"
        run = measure_command(spec.command, spec.cwd, log_path, settings.timeout_s)
        runs.append(run)
        print(
            f"  {tool:<13} {dump.target_mb:>5g} MB  run {repeat}/{repeats}: "
            f"{describe_run(run, dump)}",
            flush=True,
        )
        if not run.ok:
            print(indent(tail_of(log_path)), flush=True)
            break  # a failing tool will fail again; don't burn the remaining repeats
    return runs


def describe_run(run: RunMeasurement, dump: ScaledDumpInfo) -> str:
    if run.timed_out:
        return f"TIMED OUT after {run.wall_s:.0f} s (log: {run.log})"
    if run.returncode != 0:
        return f"FAILED with exit code {run.returncode} (log: {run.log})"
    return (
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
    xml_mb: float | None = None  # floor only: decompressed size of the dump
    runs: list[dict[str, Any]] = field(default_factory=list)


def summarise_runs(tool: str, dump: ScaledDumpInfo, runs: list[RunMeasurement]) -> ToolSummary:
    raw = [asdict(run) for run in runs]
    good = [run for run in runs if run.ok]
    if not good or len(good) < len(runs):
        return ToolSummary(tool, dump.target_mb, ok=False, repeats=len(runs), runs=raw)
    wall_s = statistics.median(run.wall_s for run in good)
    cpu_s = statistics.median(run.cpu_s for run in good)
    return ToolSummary(
        tool,
        dump.target_mb,
        ok=True,
        repeats=len(good),
        wall_s=wall_s,
        cpu_s=cpu_s,
        mb_per_cpu_s=dump.wikitext_mb / cpu_s,
        mb_per_wall_s=dump.wikitext_mb / wall_s,
        peak_rss_mib=statistics.median(run.peak_rss_mib for run in good),
        tree_rss_mib=statistics.median(run.tree_rss_mib for run in good),
        xml_mb=decompressed_xml_mb(good[-1]) if tool == "floor" else None,
        runs=raw,
    )


def decompressed_xml_mb(floor_run: RunMeasurement) -> float:
    """The floor prints the decompressed XML size as its only output."""
    return int(Path(floor_run.log).read_text().split()[-1]) / MB


# --------------------------------------------------------------------------------------
# Text quality


@dataclass(frozen=True)
class OutputDocument:
    title: str
    text: str  # one sentence (bertkit) or paragraph (WikiExtractor) per line


def bertkit_output_layout() -> tuple[str, str]:
    """(documents glob, manifest name) of a bertkit output directory, from the project itself.

    Imported lazily: schemas pulls in pyarrow, which would raise this process's high-water
    RSS before the measurements (see trusted_maxrss_kib).
    """
    sys.path.insert(0, str(REPO_ROOT))
    try:
        from schemas.documents import DOCUMENTS_FILE_GLOB
        from schemas.manifest import MANIFEST_NAME
    except ImportError:
        return "documents-*.parquet", "_manifest.json"
    return DOCUMENTS_FILE_GLOB, MANIFEST_NAME


def bertkit_documents(output_dir: Path) -> Iterator[OutputDocument]:
    """Documents from OUTPUT/documents-*.parquet; sentences joined with newlines."""
    import pyarrow.parquet as pq  # only the quality check needs pyarrow

    documents_glob, _ = bertkit_output_layout()
    for path in sorted(output_dir.glob(documents_glob)):
        for batch in pq.ParquetFile(path).iter_batches(
            columns=["title", "sentences"], batch_size=256
        ):
            for title, sentences in zip(
                batch.column("title").to_pylist(),
                batch.column("sentences").to_pylist(),
                strict=True,
            ):
                yield OutputDocument(title, "\n".join(sentences))


DOC_START_RE = re.compile(r'<doc id="[^"]*"(?: revid="[^"]*")? url="[^"]*" title="(.*)">$')


def wikiextractor_documents(output_dir: Path) -> Iterator[OutputDocument]:
    """Documents from WikiExtractor's OUTPUT/??/wiki_?? files.

    The <doc ...> and </doc> lines and the title line WikiExtractor repeats as the first line
    of each document are dropped (bertkit keeps the title in its own column), as are blank
    lines, so both tools are compared on running text only.
    """
    for path in sorted(output_dir.glob("*/wiki_*")):
        title: str | None = None
        lines: list[str] = []
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                line = line.rstrip("\n")
                if title is None:
                    if match := DOC_START_RE.match(line):
                        title = scale_dump.unescape_xml_text(match.group(1))
                        lines = []
                elif line == "</doc>":
                    if lines and lines[0] == title:
                        lines = lines[1:]
                    # WikiExtractor HTML-escapes &, < and > (--html-safe, on by default) so its
                    # output can hold <doc> tags; that escaping is not an artifact of the text.
                    yield OutputDocument(title, unescape("\n".join(lines)))
                    title = None
                elif line.strip():
                    lines.append(line)


DOCUMENT_READERS: dict[str, Callable[[Path], Iterator[OutputDocument]]] = {
    "bertkit": bertkit_documents,
    "wikiextractor": wikiextractor_documents,
}

# Each check counts regex matches in the output text; all are reported per MB of output.
ARTIFACT_PATTERNS: dict[str, re.Pattern[str]] = {
    # "()", "( )", "(, )", "(; )": what is left when a template inside parentheses vanishes.
    "empty_parens": re.compile(r"\(\s*[,;]?\s*\)"),
    "open_template {{": re.compile(r"\{\{"),
    "close_template }}": re.compile(r"\}\}"),
    "open_link [[": re.compile(r"\[\["),
    "close_link ]]": re.compile(r"\]\]"),
    "bold_quotes '''": re.compile(r"'''"),
    "ref_tag <ref": re.compile(r"<ref", re.IGNORECASE),
    "html_entity &x;": re.compile(r"&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);"),
    # Table rows/cells, list items, headings: lines that still start with wiki syntax.
    "markup_line_start |!*#=": re.compile(r"^[ \t]*[|!*#=]", re.MULTILINE),
}
# A good sign rather than an artifact: quantities such as "1,300 mi" survive extraction.
NUMBER_UNIT_RE = re.compile(
    r"\d(?:[\d,.]*\d)?(?:\s|&nbsp;|\u00a0)?(?:km|mi|miles?|kilometres?|kilometers?|ft|feet|"
    r"metres?|meters?|m|acres?|sq ?mi|km2|km²|°[CF]|in|inches|cm|mm|kg|lb|pounds?|ha)\b"
)
CONVERT_RE = re.compile(r"\{\{\s*[Cc]onvert\s*\|\s*(-?\d[\d,]*(?:\.\d+)?)")
CONVERT_TEMPLATE_RE = re.compile(r"\{\{\s*[Cc]onvert\s*\|[^{}]*\}\}")


def convert_number_pattern(number: str) -> re.Pattern[str]:
    """Matches the number as written in the wikitext or with thousands separators ("1,300")."""
    digits = number.lstrip("-").replace(",", "")
    whole, _, fraction = digits.partition(".")
    grouped = f"{int(whole):,}" + (f".{fraction}" if fraction else "")
    variants = sorted({re.escape(digits), re.escape(grouped)}, key=len, reverse=True)
    return re.compile(rf"(?<![\d.,])(?:{'|'.join(variants)})(?!\d)")


def unambiguous_convert_numbers(wikitext: str) -> list[str]:
    """First numbers of the page's {{convert|N|...}} that occur nowhere else in the page.

    A number that also appears in the running text (a year, a repeated figure) would be found
    in the output even if the template were dropped, so only numbers that can reach the
    output through the template alone are checked.
    """
    elsewhere = CONVERT_TEMPLATE_RE.sub(" ", wikitext)
    return [
        number
        for number in CONVERT_RE.findall(wikitext)
        if not convert_number_pattern(number).search(elsewhere)
    ]


def expected_convert_numbers(dump: ScaledDumpInfo) -> tuple[dict[str, list[str]], int]:
    """Checkable convert numbers per source article title, and their count in the scaled dump.

    The scaled dump is the sample's pages repeated, so both follow from the sample and the
    same page order the builder used, without decompressing the scaled file again.
    """
    source = scale_dump.read_source_dump(Path(dump.source))
    per_title: dict[str, list[str]] = {}
    per_page_count: list[int] = []
    for page, is_redirect in zip(source.pages, source.page_is_redirect, strict=True):
        numbers = (
            [] if is_redirect else unambiguous_convert_numbers(scale_dump.wikitext_of_page(page))
        )
        per_title[scale_dump.title_of_page(page)] = numbers
        per_page_count.append(len(numbers))
    total = sum(
        per_page_count[page_index]
        for _, page_index in scale_dump.pages_until_target(source, int(dump.target_mb * MB))
    )
    return per_title, total


@dataclass
class QualityReport:
    documents: int = 0
    empty_documents: int = 0
    output_bytes: int = 0
    artifacts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ARTIFACT_PATTERNS, 0))
    number_unit_mentions: int = 0
    convert_found: int = 0
    convert_total: int = 0

    @property
    def output_mb(self) -> float:
        return self.output_bytes / MB

    def per_mb(self, count: int) -> float:
        return count / self.output_mb if self.output_bytes else 0.0

    @property
    def convert_survival(self) -> float:
        return self.convert_found / self.convert_total if self.convert_total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "output_mb": self.output_mb,
            "artifacts_per_mb": {name: self.per_mb(n) for name, n in self.artifacts.items()},
            "number_unit_per_mb": self.per_mb(self.number_unit_mentions),
            "convert_survival": self.convert_survival,
        }


def assess_quality(
    documents: Iterable[OutputDocument], convert_numbers: dict[str, list[str]], convert_total: int
) -> QualityReport:
    report = QualityReport(convert_total=convert_total)
    patterns: dict[str, re.Pattern[str]] = {}
    for doc in documents:
        report.documents += 1
        report.empty_documents += not doc.text.strip()
        report.output_bytes += len(doc.text.encode("utf-8"))
        for name, pattern in ARTIFACT_PATTERNS.items():
            report.artifacts[name] += len(pattern.findall(doc.text))
        report.number_unit_mentions += len(NUMBER_UNIT_RE.findall(doc.text))
        for number in convert_numbers.get(scale_dump.source_title(doc.title), ()):
            pattern = patterns.setdefault(number, convert_number_pattern(number))
            report.convert_found += pattern.search(doc.text) is not None
    return report


# --------------------------------------------------------------------------------------
# Reporting


def print_rss_table(summaries: dict[float, dict[str, ToolSummary]], tools: list[str]) -> None:
    print("\nPeak RSS vs input size (median of repeats; max process / sum over the tree)")
    headers = ["wikitext MB"] + [
        f"{tool} {what}"
        for tool in tools
        if tool != "floor"
        for what in ("MB/CPU-s", "peak MiB", "tree MiB")
    ]
    rows = []
    for size, by_tool in sorted(summaries.items()):
        row = [f"{size:g}"]
        for tool in tools:
            if tool == "floor":
                continue
            summary = by_tool.get(tool)
            row += [
                fmt(summary and summary.mb_per_cpu_s, ".2f"),
                fmt(summary and summary.peak_rss_mib, ".0f"),
                fmt(summary and summary.tree_rss_mib, ".0f"),
            ]
        rows.append(row)
    print_table(headers, rows)


def print_quality_table(reports: dict[str, QualityReport]) -> None:
    print("\nText quality on the same input (counts per MB of output text)")
    tools = list(reports)
    rows = [
        ["documents"] + [str(reports[t].documents) for t in tools],
        ["empty documents"] + [str(reports[t].empty_documents) for t in tools],
        ["output MB"] + [f"{reports[t].output_mb:.2f}" for t in tools],
    ]
    for name in ARTIFACT_PATTERNS:
        rows.append(
            [name] + [f"{reports[t].per_mb(reports[t].artifacts[name]):.2f}" for t in tools]
        )
    rows.append(
        ["number+unit mentions"]
        + [f"{reports[t].per_mb(reports[t].number_unit_mentions):.1f}" for t in tools]
    )
    rows.append(
        ["{{convert}} N in output"]
        + [f"{reports[t].convert_survival:.1%} of {reports[t].convert_total}" for t in tools]
    )
    print_table(["check", *tools], rows)


def print_final_table(by_tool: dict[str, ToolSummary], size_mb: float) -> None:
    print(f"\nThroughput on {size_mb:g} MB of wikitext (median of repeats)")
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
                fmt(summary.mb_per_cpu_s, ".2f"),
                fmt(summary.mb_per_wall_s, ".2f"),
                f"{fmt(summary.peak_rss_mib, '.0f')} / {fmt(summary.tree_rss_mib, '.0f')}",
                fmt(ratio, ".2f") + ("x" if ratio is not None else ""),
            ]
        )
    print_table(
        ["tool", "MB/CPU-s", "wall MB/s", "peak RSS MiB (max/tree)", "vs WikiExtractor per core"],
        rows,
    )
    floor = by_tool.get("floor")
    if floor and floor.ok and floor.xml_mb and floor.cpu_s:
        print(
            f"floor: bz2 decompression of the {floor.xml_mb:.1f} MB of XML runs at "
            f"{floor.xml_mb / floor.cpu_s:.1f} MB/CPU-s (XML bytes, not wikitext)"
        )
    print(f"target: bertkit ≥ {TARGET_RATIO}× WikiExtractor per core -> {verdict(by_tool)}")


def per_core_ratio(by_tool: dict[str, ToolSummary]) -> float | None:
    bertkit, wikiextractor = by_tool.get("bertkit"), by_tool.get("wikiextractor")
    if bertkit and wikiextractor and bertkit.ok and wikiextractor.ok:
        return bertkit.mb_per_cpu_s / wikiextractor.mb_per_cpu_s  # type: ignore[operator]
    return None


def verdict(by_tool: dict[str, ToolSummary]) -> str:
    ratio = per_core_ratio(by_tool)
    if ratio is None:
        return "not measured (bertkit or WikiExtractor did not run successfully)"
    return f"{'MET' if ratio >= TARGET_RATIO else 'NOT MET'} ({ratio:.2f}×)"


# --------------------------------------------------------------------------------------
# Main


def parse_sizes(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--target-mb",
        type=float,
        default=50.0,
        help="wikitext MB of the headline and quality run (default 50)",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
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
        "--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}"
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
    args = parser.parse_args(argv)
    if args.quick:
        args.target_mb, args.sizes, args.repeats = 12.0, [12.0], 1
    args.tools = [tool for tool in args.tools.split(",") if tool]
    unknown = set(args.tools) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    args.workdir = args.workdir.resolve()
    return args


def prepare_scaled_dump(size_mb: float, workdir: Path) -> ScaledDumpInfo:
    """Build (or reuse) a scaled dump in a child process.

    Building holds the sample dump in memory; doing it here would raise this process's
    high-water RSS, which every tool it launches then inherits in its ru_maxrss.
    """
    script = Path(scale_dump.__file__).resolve()
    subprocess.run(
        [sys.executable, str(script), "--target-mb", f"{size_mb:g}", "--workdir", str(workdir)],
        check=True,
    )
    dump_path, info_path = scale_dump.scaled_dump_paths(workdir, size_mb)
    info = scale_dump.load_cached_info(dump_path, info_path, size_mb, scale_dump.find_sample_dump())
    if info is None:
        raise RuntimeError(f"{script} did not leave a usable {dump_path}")
    return info


def machine_description() -> dict[str, Any]:
    return measure.machine_description(
        beam=importlib_version("apache-beam"), wikiextractor=WIKIEXTRACTOR_VERSION
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sorted(set(args.sizes) | {args.target_mb})
    if "wikiextractor" in args.tools:
        ensure_wikiextractor(args.workdir)
    dumps = {size: prepare_scaled_dump(size, args.workdir) for size in sizes}
    settings = RunSettings(
        workdir=args.workdir,
        timeout_s=args.timeout,
        bertkit_module=args.bertkit_module,
        bertkit_args=tuple(args.bertkit_args),
    )
    summaries: dict[float, dict[str, ToolSummary]] = {}
    for size in sizes:
        # The floor is only context for the headline size; RSS-vs-size is about extractors.
        tools = [t for t in args.tools if t != "floor" or size == args.target_mb]
        summaries[size] = {}
        for tool in tools:
            runs = run_tool_repeatedly(tool, dumps[size], args.repeats, settings)
            summaries[size][tool] = summarise_runs(tool, dumps[size], runs)

    target_dump = dumps[args.target_mb]
    convert_numbers, convert_total = expected_convert_numbers(target_dump)
    quality = {
        tool: assess_quality(
            DOCUMENT_READERS[tool](output_dir_for(args.workdir, tool, args.target_mb)),
            convert_numbers,
            convert_total,
        )
        for tool in EXTRACTORS
        if tool in args.tools and summaries[args.target_mb][tool].ok
    }

    if len(sizes) > 1:
        print_rss_table(summaries, args.tools)
    if quality:
        print_quality_table(quality)
    print_final_table(summaries[args.target_mb], args.target_mb)
    write_results(args, dumps, summaries, quality)
    return 0 if all(s.ok for by_tool in summaries.values() for s in by_tool.values()) else 1


def read_bertkit_manifest(workdir: Path, size_mb: float) -> dict[str, Any] | None:
    """The counts and drop reasons bertkit recorded, to explain document-count differences."""
    path = output_dir_for(workdir, "bertkit", size_mb) / bertkit_output_layout()[1]
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
        "machine": machine_description(),
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
