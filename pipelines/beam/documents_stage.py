"""What the documents stages share: their command's run (`bertkit wikipedia`, `books`,
`corpus`), and the graph of the two that read whole files, grouped into units of work
(`bertkit books`, `bertkit corpus`).

A files stage plans its sorted input files into units of about `--unit-mb` (`plan_units`,
fixed by the inputs alone), spreads the units over the workers, and extracts each unit in
one DoFn call: the files in their sorted order, each file's documents in file order, into the
unit's own Parquet files and rejects, then a summary. So each documents file's bytes are fixed
by the inputs, whatever the runner. A stage names its files (`file_name`) and reads one file's
documents (`documents`); the rest is here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import (
    DOCUMENTS_STAGE_PATHS,
    DocumentFileWriter,
    UnitTally,
    finish_unit,
    prepare_output_dir,
    run_documents_pipeline,
)
from pipelines.beam.empty_outputs import check_documents
from pipelines.beam.inputs import common_root
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    INPUT_BYTES_READ,
    INPUT_FILES_READ,
    StageCounters,
    counting_reader,
)
from pipelines.beam.runner import parse_stage, spread_over_workers
from pipelines.command.progress import Phase
from pipelines.io.storage import Reader
from schemas import Document

# What a files stage's extraction counts (Beam counters in the "bertkit" namespace).
COUNTERS = (INPUT_BYTES_READ, INPUT_FILES_READ, DOCUMENTS_EXTRACTED)


def run_documents_stage(
    argv: list[str] | None,
    stage: str,
    config_class: type,
    extraction: Callable[[Any], tuple[list[dict[str, Any]], beam.PTransform]],
    progress_phases: Callable[[int], list[Phase]],
) -> int:
    """Run `bertkit STAGE ARGV`: parse (the help is the stage package's docstring), list the
    inputs and make the extraction step (`extraction(config)`), prepare the output, run the
    graph. Return the exit code: 1 when an input was not read to its end, or when no
    document was kept and records were rejected (pipelines/beam/empty_outputs.py)."""
    description = sys.modules[f"pipelines.{stage}"].__doc__
    config, options = parse_stage(
        config_class, argv, f"bertkit {stage}", description, DOCUMENTS_STAGE_PATHS
    )
    inputs, extract = extraction(config)
    prepare_output_dir(config.output, config.overwrite, stage)
    progress = progress_phases(sum(item["bytes"] for item in inputs))
    code = run_documents_pipeline(
        options, stage, extract, inputs, config.recorded(), config.output, progress
    )
    return code | check_documents(options, stage, config.output)  # 0 documents: a WARNING


def files_progress_phases(input_bytes: int) -> list[Phase]:
    """A files stage's progress line: stored bytes read of the inputs' total, files,
    documents."""
    shown = ((INPUT_FILES_READ, "files"), (DOCUMENTS_EXTRACTED, "documents"))
    rate = (DOCUMENTS_EXTRACTED, "documents")
    return [Phase("read", INPUT_BYTES_READ, input_bytes, "read", True, rate, shown)]


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


class ExtractFilesFn(beam.DoFn):
    """One unit (a group of input files) → its Parquet files and rejects; yields a summary.
    A stage's subclass gives `file_name` and `documents`."""

    def __init__(self, output_dir: str, root: str, config: Any) -> None:
        self._output_dir = output_dir
        self._root = root
        self._config = config
        self._counters: StageCounters | None = None

    def file_name(self, path: str) -> str:
        """The name the documents of the file at `path` record (relative to the inputs'
        common root)."""
        raise NotImplementedError

    def documents(
        self, path: str, name: str, tally: UnitTally, reader: Reader
    ) -> Iterator[Document]:
        """The documents of the file at `path`, in file order; what is rejected goes to
        `tally`. `reader` opens a stored file, counting the bytes it reads."""
        raise NotImplementedError

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
            counters.add(INPUT_FILES_READ)
            for document in self.documents(path, self.file_name(path), tally, reader):
                writer.add(document)
                counters.add(DOCUMENTS_EXTRACTED)
        summary = finish_unit(self._output_dir, tally, writer.close())
        counters.flush()
        yield summary


class ExtractFiles(beam.PTransform):
    """Input files → documents written under `output_dir`; outputs one summary per unit.
    A stage's subclass names its DoFn (`fn_class`)."""

    fn_class: type[ExtractFilesFn] = ExtractFilesFn

    def __init__(self, inputs: list[dict], output_dir: str, config: Any) -> None:
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
            self.fn_class(self._output_dir, root, self._config)
        )
