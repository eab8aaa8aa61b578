"""The stage's graph: `ExtractCorpus`, corpus files → documents files, a summary per unit."""

from __future__ import annotations

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import DocumentFileWriter, UnitTally, finish_unit
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    INPUT_BYTES_READ,
    INPUT_FILES_READ,
    StageCounters,
    counting_reader,
)
from pipelines.beam.runner import spread_over_workers
from pipelines.books.reading import common_root
from pipelines.books.transforms import plan_units
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.reading import (
    input_kind,
    jsonl_documents,
    parquet_documents,
    record_file_name,
)

# What the extraction DoFn counts (Beam counters in the "bertkit" namespace).
COUNTERS = (INPUT_BYTES_READ, INPUT_FILES_READ, DOCUMENTS_EXTRACTED)


class _ExtractCorpusFn(beam.DoFn):
    """One unit (a group of corpus files) → its Parquet files and rejects; yields a summary.

    The files of a unit are read in their sorted order and their records in file order, so
    each documents file's bytes are fixed by the inputs, whatever the runner.
    """

    def __init__(self, output_dir: str, root: str, config: CorpusConfig) -> None:
        self._output_dir = output_dir
        self._root = root
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters(COUNTERS)
        # Stored bytes as they are read: the progress line's "read" and its ETA.
        self._reader = counting_reader(files.READER, self._counters, INPUT_BYTES_READ)

    def process(self, unit: tuple[int, list[str]]):
        number, paths = unit
        tally = UnitTally(f"{number:05d}", output_dir=self._output_dir)
        writer = DocumentFileWriter(self._output_dir, tally.unit, self._config.max_file_text_bytes)
        counters, reader = self._counters, self._reader
        assert counters is not None
        for path in paths:
            name = record_file_name(path, self._root)
            counters.add(INPUT_FILES_READ)
            read = parquet_documents if input_kind(path) == "parquet" else jsonl_documents
            for document in read(path, name, self._config, tally, reader):
                writer.add(document)
                counters.add(DOCUMENTS_EXTRACTED)
        summary = finish_unit(self._output_dir, tally, writer.close())
        counters.flush()
        yield summary


class ExtractCorpus(beam.PTransform):
    """Corpus files → documents written under `output_dir`; outputs one summary per unit."""

    def __init__(self, inputs: list[dict], output_dir: str, config: CorpusConfig) -> None:
        super().__init__()
        self._inputs = inputs
        self._output_dir = output_dir
        self._config = config

    def expand(self, pbegin):
        root = common_root([item["path"] for item in self._inputs])
        units = pbegin | "PlanUnits" >> beam.Create(
            plan_units(self._inputs, self._config.unit_bytes), reshuffle=False
        )
        return spread_over_workers(units, "SpreadUnits") | "ExtractDocuments" >> beam.ParDo(
            _ExtractCorpusFn(self._output_dir, root, self._config)
        )
