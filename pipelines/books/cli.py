"""`bertkit books` from the command line: parse, check the inputs, then run the graph.

Its --help is the package docstring (pipelines/books/__init__.py).
"""

from __future__ import annotations

from typing import Any

from pipelines.beam.documents_stage import files_progress_phases as progress_phases
from pipelines.beam.documents_stage import run_documents_stage
from pipelines.beam.inputs import check_names, expand_inputs
from pipelines.beam.runner import stage_main
from pipelines.books.config import BooksConfig
from pipelines.books.reading import book_name
from pipelines.books.transforms import ExtractBooks

STAGE = "books"


def extraction(config: BooksConfig) -> tuple[list[dict[str, Any]], ExtractBooks]:
    """The files --input names (with their sizes) and the step that extracts them."""
    inputs = expand_inputs(config.input)
    check_names(inputs, book_name)
    return inputs, ExtractBooks(inputs, config.output, config)


def run(argv: list[str] | None = None) -> int:
    """Run the stage; return the exit code (`run_documents_stage`)."""
    return run_documents_stage(argv, STAGE, BooksConfig, extraction, progress_phases)


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit books")
