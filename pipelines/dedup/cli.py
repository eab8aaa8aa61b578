"""`bertkit dedup` from the command line: parse, check every input, then run the graph.

Its --help is the package docstring (pipelines/dedup/__init__.py).
"""

from __future__ import annotations

import re
import sys

from pipelines.beam import files
from pipelines.beam.documents import (
    DOCUMENTS_LISTING,
    DOCUMENTS_RUN_FILES,
    DocumentsInput,
    DocumentsInputError,
    read_documents_input,
    report,
)
from pipelines.beam.empty_outputs import check_documents
from pipelines.beam.progress import progress_shown
from pipelines.beam.runner import (
    StagePaths,
    make_pipeline,
    parse_stage,
    report_submission,
    stage_main,
    submitted_only,
)
from pipelines.command.progress import Phase
from pipelines.dedup.buckets import BUCKETS, EDGES, WORK_DIR
from pipelines.dedup.config import DOCUMENTS_DIRS, DedupConfig, DedupError
from pipelines.dedup.transforms import (
    DOCUMENTS_HASHED,
    DOCUMENTS_REWRITTEN,
    DeduplicateDocuments,
    WriteDedupManifest,
)
from pipelines.dedup.units import DedupUnit, plan_units
from schemas import MANIFEST_NAME
from schemas.duplicates import DUPLICATES_DIR

STAGE = "dedup"
# Every name `bertkit dedup` writes: a documents stage's, its duplicates reports, and the
# spill files of a run that did not finish (buckets.py).
DEDUP_RUN_FILES = (
    rf"{DOCUMENTS_RUN_FILES}"
    rf"|{re.escape(DUPLICATES_DIR)}/duplicates-[0-9]+(?:-[0-9]+)*\.parquet(?:\.tmp-[0-9a-f]{{32}})?"
    rf"|{WORK_DIR}/(?:{BUCKETS}/p[0-9]+|{EDGES}/[0-9]+-[0-9]+)/[0-9a-z-]+\.bin"
)
_PATHS = StagePaths(input_dirs=(DOCUMENTS_DIRS,))


def parse_config(argv: list[str] | None):
    """DedupConfig's flags; every other flag goes to Beam (runner, workers, s3, GCS)."""
    description = sys.modules["pipelines.dedup"].__doc__
    config, options = parse_stage(DedupConfig, argv, "bertkit dedup", description, _PATHS)
    config.validate()
    return config, options


def progress_phases(total_documents: int) -> list[Phase]:
    """Two passes over every input document: hash them, then write those kept."""
    return [
        Phase(
            "hash",
            DOCUMENTS_HASHED,
            total_documents,
            "documents",
            rate=(DOCUMENTS_HASHED, "documents"),
        ),
        Phase("write", DOCUMENTS_REWRITTEN, total_documents, "documents"),
    ]


def input_record(item: DocumentsInput, output: str) -> dict:
    """An input directory as the manifest written into `output` records it."""
    return {**item.summary(output), "sentences": item.manifest.counts.get("sentences", 0)}


def run(argv: list[str] | None = None, units_order: list[DedupUnit] | None = None) -> int:
    """Deduplicate; return the exit code. Raises DedupError or DocumentsInputError on bad
    input, before any work. `units_order` (tests) hands the units to the runner in another
    order: the output must not change."""
    config, options = parse_config(argv)
    inputs = [read_documents_input(directory) for directory in config.documents]
    files.clear_earlier_run(
        config.output, DEDUP_RUN_FILES, config.overwrite, STAGE, listing=DOCUMENTS_LISTING
    )
    units = plan_units(inputs)
    if units_order is not None:
        if sorted(units_order) != sorted(units):
            raise ValueError("units_order must be the planned units in another order")
        units = units_order
    recorded = [input_record(item, config.output) for item in inputs]
    total = sum(record["documents"] for record in recorded)
    manifest = WriteDedupManifest(config.output, STAGE, recorded, config.recorded())
    with (
        progress_shown(options, STAGE, progress_phases(total)),
        make_pipeline(options) as pipeline,
    ):
        (
            pipeline
            | "DeduplicateDocuments" >> DeduplicateDocuments(inputs, units, config.output, config)
            | "WriteManifest" >> manifest
        )
    if submitted_only(options):
        manifest_url = files.join(config.output, MANIFEST_NAME)
        return report_submission(pipeline, options, manifest_url, f"bertkit {STAGE}")
    return report(config.output) | check_documents(options, STAGE, config.output)


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit dedup", (DedupError, DocumentsInputError))
