"""The Document record: one article or book, as an ordered list of sentences.

Written by `pipelines.wikipedia` and `pipelines.books` as zstd Parquet
(`DIR/documents-*.parquet`), read by the vocabulary and example stages. Any Parquet reader
works as is: `pyarrow.dataset.dataset(DIR)`, DuckDB's `read_parquet('DIR/*.parquet')`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

DOCUMENT_SCHEMA_VERSION = "1.0"
DOCUMENTS_FILE_GLOB = "documents-*.parquet"


class DocumentColumn:
    """Column names of the Document schema."""

    ID = "id"
    SOURCE = "source"
    TITLE = "title"
    SENTENCES = "sentences"
    URL = "url"
    REVISION = "revision"


DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field(
            DocumentColumn.ID,
            pa.string(),
            nullable=False,
            metadata={"doc": "stable, source-qualified id, e.g. 'enwiki/12', 'books/alice29'"},
        ),
        pa.field(
            DocumentColumn.SOURCE,
            pa.string(),
            nullable=False,
            metadata={"doc": "corpus the document came from: the dump's dbname, 'books', …"},
        ),
        pa.field(DocumentColumn.TITLE, pa.string(), nullable=False),
        pa.field(
            DocumentColumn.SENTENCES,
            pa.list_(pa.field("element", pa.string(), nullable=False)),  # Parquet's own name,
            nullable=False,
            metadata={"doc": "running text, one sentence per item, in document order"},
        ),
        pa.field(DocumentColumn.URL, pa.string(), nullable=True),
        pa.field(
            DocumentColumn.REVISION,
            pa.int64(),
            nullable=True,
            metadata={"doc": "MediaWiki revision id the text was taken from"},
        ),
    ],
    metadata={"bertkit.record": "Document", "bertkit.schema_version": DOCUMENT_SCHEMA_VERSION},
)


@dataclass(frozen=True, slots=True)
class Document:
    """One document. `sentences` is non-empty for every written document."""

    id: str
    source: str
    title: str
    sentences: tuple[str, ...]
    url: str | None = None
    revision: int | None = None

    def text_bytes(self) -> int:
        """UTF-8 size of the sentences: the 'bytes' the manifests count."""
        return sum(len(s.encode("utf-8")) for s in self.sentences)


def documents_table(documents: Iterable[Document]) -> pa.Table:
    """Documents → an Arrow table with exactly DOCUMENT_SCHEMA (field order and metadata)."""
    docs = list(documents)
    return pa.table(
        {
            DocumentColumn.ID: [d.id for d in docs],
            DocumentColumn.SOURCE: [d.source for d in docs],
            DocumentColumn.TITLE: [d.title for d in docs],
            DocumentColumn.SENTENCES: [list(d.sentences) for d in docs],
            DocumentColumn.URL: [d.url for d in docs],
            DocumentColumn.REVISION: [d.revision for d in docs],
        },
        schema=DOCUMENT_SCHEMA,
    )


def documents_from_table(table: pa.Table) -> list[Document]:
    """The inverse of `documents_table`, for readers and tests."""
    columns = table.to_pydict()
    return [
        Document(
            id=columns[DocumentColumn.ID][i],
            source=columns[DocumentColumn.SOURCE][i],
            title=columns[DocumentColumn.TITLE][i],
            sentences=tuple(columns[DocumentColumn.SENTENCES][i]),
            url=columns[DocumentColumn.URL][i],
            revision=columns[DocumentColumn.REVISION][i],
        )
        for i in range(table.num_rows)
    ]
