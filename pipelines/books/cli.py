"""`bertkit books` from the command line: parse, check the inputs, then run the graph.

Its --help is the package docstring (pipelines/books/__init__.py).
"""

from __future__ import annotations

import sys
from typing import Any

from pipelines.beam.documents import (
    DOCUMENTS_STAGE_PATHS,
    expand_inputs,
    prepare_output_dir,
    run_documents_pipeline,
)
from pipelines.beam.empty_outputs import check_documents
from pipelines.beam.progress import DOCUMENTS_EXTRACTED, INPUT_BYTES_READ, INPUT_FILES_READ
from pipelines.beam.runner import parse_stage, stage_main
from pipelines.books.config import BooksConfig
from pipelines.books.transforms import ExtractBooks
from pipelines.command.progress import Phase

STAGE = "books"


def progress_phases(input_bytes: int) -> list[Phase]:
    """The progress line: stored bytes read of the inputs' total, files, documents."""
    shown = ((INPUT_FILES_READ, "files"), (DOCUMENTS_EXTRACTED, "documents"))
    rate = (DOCUMENTS_EXTRACTED, "documents")
    return [Phase("read", INPUT_BYTES_READ, input_bytes, "read", True, rate, shown)]


def extraction(config: BooksConfig) -> tuple[list[dict[str, Any]], ExtractBooks]:
    """The files --input names (with their sizes) and the step that extracts them."""
    inputs = expand_inputs(config.input)
    return inputs, ExtractBooks(inputs, config.output, config)


def run(argv: list[str] | None = None) -> int:
    """Run the stage; return the exit code (1 when an input was not read to its end, or
    when no document was kept and records were rejected: pipelines/beam/empty_outputs.py)."""
    description = sys.modules["pipelines.books"].__doc__
    config, options = parse_stage(
        BooksConfig, argv, "bertkit books", description, DOCUMENTS_STAGE_PATHS
    )
    inputs, extract = extraction(config)
    prepare_output_dir(config.output, config.overwrite, STAGE)
    progress = progress_phases(sum(item["bytes"] for item in inputs))
    code = run_documents_pipeline(
        options, STAGE, extract, inputs, config.recorded(), config.output, progress
    )
    return code | check_documents(options, STAGE, config.output)  # 0 documents: a WARNING


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit books")
