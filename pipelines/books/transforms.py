"""The stage's graph: `ExtractBooks`, book files → documents files, a summary per unit
(pipelines/beam/documents_stage.py: the units, and what a files stage's DoFn does)."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.beam.documents import UnitTally
from pipelines.beam.documents_stage import (
    COUNTERS,
    ExtractFiles,
    ExtractFilesFn,
    common_root,
    plan_units,
)
from pipelines.books.reading import book_document, book_name, line_file_documents
from pipelines.io.storage import Reader
from schemas import Document

__all__ = ["COUNTERS", "ExtractBooks", "common_root", "plan_units"]


class _ExtractBooksFn(ExtractFilesFn):
    """One unit (a group of book files) → its Parquet files and rejects; yields a summary."""

    def file_name(self, path: str) -> str:
        return book_name(path, self._root)

    def documents(
        self, path: str, name: str, tally: UnitTally, reader: Reader
    ) -> Iterator[Document]:
        if self._config.format == "lines":
            yield from line_file_documents(path, name, self._config, tally, reader)
        elif (document := book_document(path, name, self._config, tally, reader)) is not None:
            yield document


class ExtractBooks(ExtractFiles):
    """Book files → documents written under `output_dir`; outputs one summary per unit."""

    fn_class = _ExtractBooksFn
