"""`bertkit wikipedia` from the command line: parse, check the inputs, then run the graph.

Its --help is the package docstring (pipelines/wikipedia/__init__.py).
"""

from __future__ import annotations

from typing import Any

from pipelines.beam.documents_stage import run_documents_stage
from pipelines.beam.inputs import expand_inputs
from pipelines.beam.progress import DOCUMENTS_EXTRACTED, INPUT_BYTES_READ, PAGES_READ
from pipelines.beam.runner import stage_main
from pipelines.command.progress import Phase
from pipelines.text.wikidump import is_multistream_index
from pipelines.wikipedia.config import WikipediaConfig
from pipelines.wikipedia.transforms import ExtractArticles

STAGE = "wikipedia"


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


def extraction(config: WikipediaConfig) -> tuple[list[dict[str, Any]], ExtractArticles]:
    """The dumps --input names (with their sizes) and the step that extracts them."""
    # A glob like 'dumps/*.bz2' also matches the multistream index beside its dump: the
    # index is read through its dump, never as a dump itself.
    inputs = [i for i in expand_inputs(config.input) if not is_multistream_index(i["path"])]
    if not inputs:
        raise FileNotFoundError(
            f"--input {' '.join(config.input)!r} matches only multistream index files: pass "
            "the dumps (…-multistream.xml.bz2); each index is read through its dump"
        )
    paths = [item["path"] for item in inputs]
    return inputs, ExtractArticles(paths, config.output, config)


def run(argv: list[str] | None = None) -> int:
    """Run the stage; return the exit code (`run_documents_stage`)."""
    return run_documents_stage(argv, STAGE, WikipediaConfig, extraction, progress_phases)


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit wikipedia")
