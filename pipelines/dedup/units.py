"""One documents file as a unit of `bertkit dedup`'s work: its keys, then its rewrite.

A unit is one file of one input directory's manifest, in the `--documents` order; its name
`<directory>-<file>` (`001-00003`) names what it writes, `documents-001-00003-0000.parquet`
and `_duplicates/duplicates-001-00003.parquet`, fixed by the inputs alone. Each pass reads
the file one row group at a time (at most 1,000 documents or 8 MB of text).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.beam import files
from pipelines.beam.documents import DocumentFileWriter, DocumentsInput, UnitTally
from pipelines.dedup.candidates import EXACT_RANK, Edge, Member
from pipelines.dedup.lsh import band_keys
from pipelines.dedup.minhash import signature
from pipelines.dedup.normalise import exact_key, normalised_words
from pipelines.io.parquet import iter_row_groups
from pipelines.io.recorded_paths import record_path
from schemas import Document, DocumentColumn
from schemas.documents import documents_from_table
from schemas.duplicates import DUPLICATE_SCHEMA, DUPLICATES_DIR, EXACT, NEAR, DuplicateColumn

_KEY_COLUMNS = [DocumentColumn.ID, DocumentColumn.SOURCE, DocumentColumn.SENTENCES]


class DedupUnit(NamedTuple):
    directory: int  # position in --documents
    file: int  # position in that directory's manifest
    path: str

    @property
    def name(self) -> str:
        return f"{self.directory:03d}-{self.file:05d}"


def plan_units(inputs: list[DocumentsInput]) -> list[DedupUnit]:
    """Every documents file of every input, in --documents then manifest order."""
    return [
        DedupUnit(d, f, files.join(item.directory, output.name))
        for d, item in enumerate(inputs)
        for f, output in enumerate(item.manifest.files)
    ]


class DocumentKeys(NamedTuple):
    """What one document contributes to the buckets."""

    exact: tuple[bytes, Member]
    bands: list[tuple[bytes, Member]]  # empty for a document without words


def iter_document_keys(
    unit: DedupUnit, ngram: int, num_perm: int, seed: int, bands: int, rows: int
) -> Iterator[DocumentKeys]:
    """Each document's exact key and band keys, in file order, with the member it is."""
    row = 0
    with files.open_raw(unit.path) as source:
        for table in iter_row_groups(source, _KEY_COLUMNS):
            ids = table.column(DocumentColumn.ID).to_pylist()
            sources = table.column(DocumentColumn.SOURCE).to_pylist()
            sentences = table.column(DocumentColumn.SENTENCES)
            for index, document_id in enumerate(ids):
                words = normalised_words(sentences[index].as_py())
                member = Member(unit.directory, unit.file, row, document_id, sources[index])
                signed = signature(words, ngram, num_perm, seed)
                in_bands = (
                    []
                    if signed is None
                    else [
                        (key, member._replace(signature=signed))
                        for key in band_keys(signed, bands, rows)
                    ]
                )
                yield DocumentKeys((exact_key(words), member), in_bands)
                row += 1


def rewrite_unit(
    unit: DedupUnit,
    removed: Mapping[int, Edge],
    inputs: list[DocumentsInput],
    output_dir: str,
    max_file_text_bytes: int,
    tally: UnitTally,
) -> list:
    """Write the unit's documents but the `removed` rows (row → the edge its report names),
    and its `_duplicates/` file when it removed any; returns the documents files written."""
    writer = DocumentFileWriter(output_dir, unit.name, max_file_text_bytes)
    # Each input as the manifest's inputs[].path names it: the same bytes whatever the
    # working directory or the spelling of --documents.
    places = [record_path(item.directory, output_dir) for item in inputs]
    rows: list[dict] = []
    row = 0
    with files.open_raw(unit.path) as source:
        for table in iter_row_groups(source):
            for document in documents_from_table(table):
                tally.count("input_documents")
                edge = removed.get(row)
                if edge is None:
                    writer.add(document)
                else:
                    rows.append(_duplicate_row(document, edge, unit, places))
                    tally.drop(rows[-1][DuplicateColumn.KIND])
                row += 1
    missing = sorted(set(removed) - set(range(row)))
    if missing:
        raise ValueError(f"{unit.path} has {row} rows, but row {missing[0]} was to be removed")
    for kind in (EXACT, NEAR):
        tally.drop(kind, 0)  # both reasons in the manifest, at 0 when none
    if rows:
        write_duplicates(output_dir, unit.name, rows)
    return writer.close()


def duplicates_name(unit_name: str) -> str:
    """The unit's report, relative to the output directory."""
    return f"{DUPLICATES_DIR}/duplicates-{unit_name}.parquet"


def _duplicate_row(document: Document, edge: Edge, unit: DedupUnit, places: list[str]) -> dict:
    return {
        DuplicateColumn.ID: document.id,
        DuplicateColumn.SOURCE: document.source,
        DuplicateColumn.INPUT: places[unit.directory],
        DuplicateColumn.DUPLICATE_OF: edge.id,
        DuplicateColumn.DUPLICATE_OF_SOURCE: edge.source,
        DuplicateColumn.DUPLICATE_OF_INPUT: places[edge.directory],
        DuplicateColumn.KIND: EXACT if edge.rank == EXACT_RANK else NEAR,
        DuplicateColumn.SIMILARITY: edge.similarity,
    }


def write_duplicates(output_dir: str, unit_name: str, rows: list[dict]) -> None:
    """The unit's report rows as one zstd Parquet file, whole or absent."""
    table = pa.Table.from_pylist(rows, schema=DUPLICATE_SCHEMA)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    files.write_atomically(files.join(output_dir, duplicates_name(unit_name)), buffer.getvalue())
