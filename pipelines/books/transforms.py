"""The stage's graph: `ExtractBooks`, book files → documents files, a summary per unit."""

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
from pipelines.books.config import BooksConfig
from pipelines.books.reading import book_document, book_name, common_root, line_file_documents

# What the extraction DoFn counts (Beam counters in the "bertkit" namespace).
COUNTERS = (INPUT_BYTES_READ, INPUT_FILES_READ, DOCUMENTS_EXTRACTED)


class _ExtractBooksFn(beam.DoFn):
    """One unit (a group of book files) → its Parquet files and rejects; yields a summary."""

    def __init__(self, output_dir: str, root: str, config: BooksConfig) -> None:
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
            name = book_name(path, self._root)
            counters.add(INPUT_FILES_READ)
            if self._config.format == "lines":
                for document in line_file_documents(path, name, self._config, tally, reader):
                    writer.add(document)
                    counters.add(DOCUMENTS_EXTRACTED)
            elif (document := book_document(path, name, self._config, tally, reader)) is not None:
                writer.add(document)
                counters.add(DOCUMENTS_EXTRACTED)
        summary = finish_unit(self._output_dir, tally, writer.close())
        counters.flush()
        yield summary


def plan_units(inputs: list[dict], unit_bytes: int) -> list[tuple[int, list[str]]]:
    """Group the sorted input files into units of about `unit_bytes`: fixed by inputs alone."""
    units: list[tuple[int, list[str]]] = []
    current: list[str] = []
    size = 0
    for item in inputs:
        if current and size + item["bytes"] > unit_bytes:
            units.append((len(units), current))
            current, size = [], 0
        current.append(item["path"])
        size += item["bytes"]
    if current:
        units.append((len(units), current))
    return units


class ExtractBooks(beam.PTransform):
    """Book files → documents written under `output_dir`; outputs one summary per unit."""

    def __init__(self, inputs: list[dict], output_dir: str, config: BooksConfig) -> None:
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
            _ExtractBooksFn(self._output_dir, root, self._config)
        )
