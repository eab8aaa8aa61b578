"""The stage's graph: `ExtractCorpus`, corpus files → documents files, a summary per unit
(pipelines/beam/documents_stage.py: the units, and what a files stage's DoFn does)."""

from __future__ import annotations

from collections.abc import Iterator

from pipelines.beam.documents import UnitTally
from pipelines.beam.documents_stage import COUNTERS, ExtractFiles, ExtractFilesFn
from pipelines.corpus.reading import (
    input_kind,
    jsonl_documents,
    parquet_documents,
    record_file_name,
)
from pipelines.io.storage import Reader
from schemas import Document

__all__ = ["COUNTERS", "ExtractCorpus"]


class _ExtractCorpusFn(ExtractFilesFn):
    """One unit (a group of corpus files) → its Parquet files and rejects; yields a summary.
    Each file's records are read in file order."""

    def file_name(self, path: str) -> str:
        return record_file_name(path, self._root)

    def documents(
        self, path: str, name: str, tally: UnitTally, reader: Reader
    ) -> Iterator[Document]:
        read = parquet_documents if input_kind(path) == "parquet" else jsonl_documents
        return read(path, name, self._config, tally, reader)


class ExtractCorpus(ExtractFiles):
    """Corpus files → documents written under `output_dir`; outputs one summary per unit."""

    fn_class = _ExtractCorpusFn
