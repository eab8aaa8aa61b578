"""The stage's graph: `ExtractArticles`, dump paths → documents files, a summary per split."""

from __future__ import annotations

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import DocumentFileWriter, UnitTally, finish_unit
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    INPUT_BYTES_READ,
    PAGES_READ,
    StageCounters,
    counting_reader,
)
from pipelines.beam.runner import spread_over_workers
from pipelines.text.wikidump import (
    DumpReadError,
    DumpSplit,
    IndexMismatch,
    SiteInfo,
    iter_dump,
    plan_dump,
)
from pipelines.wikipedia.config import WikipediaConfig
from pipelines.wikipedia.pages import PageContext, document_from_page
from schemas import Reject

# What the extraction DoFn counts (Beam counters in the "bertkit" namespace).
COUNTERS = (INPUT_BYTES_READ, PAGES_READ, DOCUMENTS_EXTRACTED)


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

    def process(self, numbered_split: tuple[int, DumpSplit, IndexMismatch | None]):
        file_number, split, index_mismatch = numbered_split
        unit = f"{file_number:05d}-{split.number:05d}"
        tally = UnitTally(unit, output_dir=self._output_dir)
        if index_mismatch is not None:  # the dump is one split, read without its index
            tally.reject(
                Reject(
                    id=None,
                    input=index_mismatch.index_path,
                    position=index_mismatch.position,
                    reason="bad_index",
                    error=index_mismatch.error,
                )
            )
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
    """A dump's splits, each with why its index was not used (on the one split, if so): a
    reject of the index, recorded by that split's unit. Planning never fails on bad data:
    a dump whose header is damaged is one split, whose reading reports the damage."""
    file_number, path = numbered_path
    splits, index_mismatch = plan_dump(path, split_bytes, files.READER)
    return [(file_number, split, index_mismatch) for split in splits]


class ExtractArticles(beam.PTransform):
    """Dump paths → documents written under `output_dir`; outputs one summary per split."""

    def __init__(self, paths: list[str], output_dir: str, config: WikipediaConfig) -> None:
        super().__init__()
        self._paths = paths
        self._output_dir = output_dir
        self._config = config

    def expand(self, pbegin):
        splits = (
            pbegin
            # Spread below, once the dumps are cut: no shuffle of the paths before that.
            | "ListDumps" >> beam.Create(list(enumerate(self._paths)), reshuffle=False)
            | "PlanSplits" >> beam.FlatMap(_numbered_splits, self._config.split_bytes)
        )
        # Splits are tiny descriptors: spreading them lets every worker take some.
        return spread_over_workers(splits, "SpreadSplits") | "ExtractDocuments" >> beam.ParDo(
            _ExtractSplitFn(self._output_dir, self._config)
        )
