"""Extract sentence-split articles from Wikipedia `pages-articles` XML dumps.

Reads .xml.bz2 (single- or multi-stream: with its -index.txt.bz2 beside it, one file is cut
at stream boundaries across workers), .xml.gz and .xml, from local disk or any filesystem
Beam knows (gs://, s3://). Keeps main-namespace articles, drops redirects and disambiguation
pages, turns wikitext into running text (no lists, tables, headers, templates, references)
and splits it into sentences. Writes DIR/documents-*.parquet (Document schema), DIR/_rejects/
and, last, DIR/_manifest.json. Exits 1 if any input could not be read to its end.

    bertkit wikipedia --input 'dumps/enwiki-*-pages-articles-multistream.xml.bz2' --output out/wiki
    python -m pipelines.wikipedia --input data/wikipedia/*.xml.bz2 --output out/wiki \\
        --direct_num_workers 2 --direct_running_mode multi_processing
    python -m pipelines.wikipedia --input gs://bucket/enwiki-*-multistream.xml.bz2 \\
        --output gs://bucket/documents/wiki --runner DataflowRunner --project P \\
        --region us-central1 --temp_location gs://bucket/tmp

Flags not listed below go to Beam's PipelineOptions.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import (
    DEFAULT_MAX_FILE_TEXT_BYTES,
    DOCUMENTS_STAGE_PATHS,
    DocumentFileWriter,
    DocumentStageFlags,
    UnitTally,
    expand_inputs,
    finish_unit,
    prepare_output_dir,
    run_documents_pipeline,
)
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    INPUT_BYTES_READ,
    PAGES_READ,
    StageCounters,
    counting_reader,
)
from pipelines.beam.runner import parse_stage, stage_main
from pipelines.command.flags import ZERO_OR_MORE, option
from pipelines.command.progress import Phase
from pipelines.text.sentences import split_paragraphs
from pipelines.text.wikidump import (
    DumpReadError,
    DumpSplit,
    RawPage,
    SiteInfo,
    is_multistream_index,
    iter_dump,
    plan_splits,
)
from pipelines.text.wikitext import (
    DEFAULT_CATEGORY_NAMESPACES,
    DEFAULT_FILE_NAMESPACES,
    WikitextError,
    clean_wikitext,
)
from schemas import Document, Reject

_LOG = logging.getLogger(__name__)
STAGE = "wikipedia"

# A disambiguation page carries one of these templates (or a "… disambiguation" variant:
# {{Place name disambiguation}}, {{Hospital disambiguation}}, …); its title may also say so.
_DISAMBIGUATION_TEMPLATE = re.compile(
    r"\{\{\s*(?:disambiguation|disambig|disamb|dab|dbig|hndis|geodis|numberdis|"
    r"set index article|sia|[^{}|]*\bdisambiguation)\s*(?:\||\}\})",
    re.I,
)


# What the extraction DoFn counts (Beam counters in the "bertkit" namespace).
COUNTERS = (INPUT_BYTES_READ, PAGES_READ, DOCUMENTS_EXTRACTED)


def progress_phases(input_bytes: int) -> list[Phase]:
    """The progress line: compressed bytes read of the dumps' total, pages, documents."""
    shown = ((PAGES_READ, "pages"), (DOCUMENTS_EXTRACTED, "documents"))
    return [
        Phase(
            "read",
            INPUT_BYTES_READ,
            input_bytes,
            "read",
            in_bytes=True,
            rate=(PAGES_READ, "pages"),
            shown=shown,
        )
    ]


@dataclass(frozen=True)
class WikipediaConfig:
    """Everything that shapes the output; recorded in the manifest."""

    min_paragraph_words: int = 5
    split_bytes: int = 64 << 20
    max_file_text_bytes: int = DEFAULT_MAX_FILE_TEXT_BYTES


@dataclass(frozen=True)
class WikipediaFlags(DocumentStageFlags):
    """`bertkit wikipedia`'s command line."""

    min_paragraph_words: int = option(
        5, help="drop paragraphs with fewer words", bounds=ZERO_OR_MORE
    )
    split_mb: int = option(
        64,
        help="cut multistream dumps into splits of about this many compressed MB (0: one "
        "split per bz2 stream)",
        bounds=ZERO_OR_MORE,
    )

    def config(self) -> WikipediaConfig:
        return WikipediaConfig(
            min_paragraph_words=self.min_paragraph_words,
            split_bytes=self.split_mb << 20,
            max_file_text_bytes=self.file_mb << 20,
        )


@dataclass(frozen=True)
class PageContext:
    """What naming and cleaning a page needs from its dump."""

    path: str
    siteinfo: SiteInfo
    file_namespaces: frozenset[str] = DEFAULT_FILE_NAMESPACES
    category_namespaces: frozenset[str] = DEFAULT_CATEGORY_NAMESPACES

    @classmethod
    def of(cls, path: str, siteinfo: SiteInfo) -> PageContext:
        return cls(
            path=path,
            siteinfo=siteinfo,
            file_namespaces=DEFAULT_FILE_NAMESPACES | siteinfo.names_of((6, -2)),
            category_namespaces=DEFAULT_CATEGORY_NAMESPACES | siteinfo.names_of((14,)),
        )


def document_from_page(
    page: RawPage, context: PageContext, config: WikipediaConfig, tally: UnitTally
) -> Document | None:
    """One page → a Document, or None after recording why it was dropped or rejected."""
    siteinfo, path = context.siteinfo, context.path
    tally.count("pages")
    page_ref = f"{siteinfo.dbname}/{page.page_id}" if page.page_id is not None else None
    where = f"page #{page.ordinal} {page.title!r}"
    if page.problem:
        tally.reject(Reject(page_ref, path, where, page.problem_reason, page.problem))
        return None
    namespace = page.namespace
    if namespace is None:
        namespace = siteinfo.namespace_of(page.title)
    if namespace != 0:
        tally.drop("not_article_namespace")
        return None
    text = page.text or ""
    if page.redirect or text.lstrip()[:9].upper() == "#REDIRECT":
        tally.drop("redirect")
        return None
    if page.title.endswith("(disambiguation)") or _DISAMBIGUATION_TEMPLATE.search(text):
        tally.drop("disambiguation")
        return None
    tally.count("wikitext_bytes", len(text.encode("utf-8")))
    try:
        paragraphs = clean_wikitext(
            text,
            min_words=config.min_paragraph_words,
            file_namespaces=context.file_namespaces,
            category_namespaces=context.category_namespaces,
        )
    except WikitextError as err:
        tally.reject(Reject(page_ref, path, where, "wikitext_limit", str(err)))
        return None
    except Exception as err:  # noqa: BLE001 - a parser bug on one page must not lose the rest
        tally.reject(
            Reject(page_ref, path, where, "wikitext_error", f"{type(err).__name__}: {err}")
        )
        return None
    sentences = split_paragraphs(paragraphs)
    if not sentences:
        tally.drop("no_running_text")
        return None
    return Document(
        id=page_ref,
        source=siteinfo.dbname,
        title=page.title,
        sentences=tuple(sentences),
        url=siteinfo.page_url(page.title),
        revision=page.revision_id,
    )


class _ExtractSplitFn(beam.DoFn):
    """One dump split → its Parquet files and rejects; yields the split's summary."""

    def __init__(self, output_dir: str, config: WikipediaConfig) -> None:
        self._output_dir = output_dir
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters(COUNTERS)
        # Compressed bytes as they are read: the progress line's "read" and its ETA.
        self._reader = counting_reader(files.READER, self._counters, INPUT_BYTES_READ)

    def process(self, numbered_split: tuple[int, DumpSplit]):
        file_number, split = numbered_split
        unit = f"{file_number:05d}-{split.number:05d}"
        tally = UnitTally(unit)
        writer = DocumentFileWriter(self._output_dir, unit, self._config.max_file_text_bytes)
        context = PageContext.of(split.path, SiteInfo())
        counters = self._counters
        assert counters is not None
        try:
            for item in iter_dump(split, self._reader):
                if isinstance(item, SiteInfo):
                    context = PageContext.of(split.path, item)
                    continue
                counters.add(PAGES_READ)
                document = document_from_page(item, context, self._config, tally)
                if document is not None:
                    writer.add(document)
                    counters.add(DOCUMENTS_EXTRACTED)
        except DumpReadError as err:
            tally.fail_input(split.path, str(err), err.reason, err.position)
        summary = finish_unit(self._output_dir, tally, writer.close())
        counters.flush()
        yield summary


def _numbered_splits(numbered_path: tuple[int, str], split_bytes: int):
    file_number, path = numbered_path
    return [(file_number, split) for split in plan_splits(path, split_bytes, files.READER)]


class ExtractArticles(beam.PTransform):
    """Dump paths → documents written under `output_dir`; outputs one summary per split."""

    def __init__(self, paths: list[str], output_dir: str, config: WikipediaConfig) -> None:
        super().__init__()
        self._paths = paths
        self._output_dir = output_dir
        self._config = config

    def expand(self, pbegin):
        return (
            pbegin
            | "ListDumps" >> beam.Create(list(enumerate(self._paths)))
            | "PlanSplits" >> beam.FlatMap(_numbered_splits, self._config.split_bytes)
            # Splits are tiny descriptors: spreading them lets every worker take some.
            | "SpreadSplits" >> beam.Reshuffle()
            | "ExtractDocuments" >> beam.ParDo(_ExtractSplitFn(self._output_dir, self._config))
        )


def run(argv: list[str] | None = None) -> int:
    """Run the stage; return the exit code (1 when an input was not read to its end)."""
    flags, options = parse_stage(
        WikipediaFlags, argv, "bertkit wikipedia", __doc__, DOCUMENTS_STAGE_PATHS
    )
    config = flags.config()
    # A glob like 'dumps/*.bz2' also matches the multistream index beside its dump: the
    # index is read through its dump, never as a dump itself.
    inputs = [i for i in expand_inputs(flags.input) if not is_multistream_index(i["path"])]
    if not inputs:
        raise FileNotFoundError(
            f"--input {' '.join(flags.input)!r} matches only multistream index files: pass "
            "the dumps (…-multistream.xml.bz2); each index is read through its dump"
        )
    prepare_output_dir(flags.output, flags.overwrite, STAGE)
    paths = [item["path"] for item in inputs]
    extract = ExtractArticles(paths, flags.output, config)
    progress = progress_phases(sum(item["bytes"] for item in inputs))
    return run_documents_pipeline(options, STAGE, extract, inputs, config, flags.output, progress)


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit wikipedia")


if __name__ == "__main__":
    main()
