"""Text quality of the two extractors' outputs, for bench.extract: leftover markup, kept numbers.

Both outputs are read as documents of running text: bertkit's documents-*.parquet (sentences
joined by newlines) and WikiExtractor's ??/wiki_?? files (without the <doc> lines and the
title line it repeats, its HTML escaping undone), so the counts compare the text alone. Per
MB of output text: empty parentheses (what a template inside parentheses leaves when it
vanishes), leftover wiki and HTML markup (template and link brackets, bold quotes, <ref,
entities), lines that still start with table, list or heading syntax, and "number + unit"
mentions (a good sign: quantities that survived). And the share of {{convert|N|...}}
templates whose N reaches the output of the same article, over the numbers that can reach
it through the template alone.

The expected convert numbers come from the sample dump (bench.scale_dump repeats its pages),
so the scaled dump is not decompressed again. Not a command: bench.extract runs it on the
--target-mb outputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import unescape

from bench import scale_dump
from bench.measure import MB, print_table
from bench.scale_dump import ScaledDumpInfo


@dataclass(frozen=True)
class OutputDocument:
    title: str
    text: str  # one sentence (bertkit) or paragraph (WikiExtractor) per line


def bertkit_output_layout() -> tuple[str, str]:
    """(documents glob, manifest name) of a bertkit output directory, from the project itself.

    Imported lazily: schemas pulls in pyarrow, which would raise bench.extract's high-water
    RSS before the measurements (see measure.trusted_maxrss_kib).
    """
    from schemas.documents import DOCUMENTS_FILE_GLOB
    from schemas.manifest import MANIFEST_NAME

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


def quality_reports(outputs: dict[str, Path], dump: ScaledDumpInfo) -> dict[str, QualityReport]:
    """The quality of each tool's output directory (tool → directory) made from ``dump``."""
    if not outputs:
        return {}
    convert_numbers, convert_total = expected_convert_numbers(dump)
    return {
        tool: assess_quality(DOCUMENT_READERS[tool](output), convert_numbers, convert_total)
        for tool, output in outputs.items()
    }


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
