"""`bertkit corpus` from the command line: parse, check the inputs, then run the graph.

Its --help is the package docstring (pipelines/corpus/__init__.py).
"""

from __future__ import annotations

from typing import Any

from pipelines.beam.documents_stage import files_progress_phases as progress_phases
from pipelines.beam.documents_stage import run_documents_stage
from pipelines.beam.inputs import check_names, expand_inputs
from pipelines.beam.runner import stage_main
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.reading import CorpusInputError, input_kind, record_file_name
from pipelines.corpus.transforms import ExtractCorpus

STAGE = "corpus"


def extraction(config: CorpusConfig) -> tuple[list[dict[str, Any]], ExtractCorpus]:
    """The files --input names (with their sizes; a file of another kind is refused) and
    the step that extracts them."""
    inputs = expand_inputs(config.input)
    for item in inputs:
        input_kind(item["path"])
    check_names(inputs, record_file_name)
    return inputs, ExtractCorpus(inputs, config.output, config)


def run(argv: list[str] | None = None) -> int:
    """Run the stage; return the exit code (`run_documents_stage`)."""
    return run_documents_stage(argv, STAGE, CorpusConfig, extraction, progress_phases)


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit corpus", refusals=(CorpusInputError,))
