"""Parquet corpus files, read a batch of rows at a time with only the columns named (Beam-free).

What `datasets.Dataset.to_parquet`, DuckDB's `COPY … TO 'x.parquet'`, Spark and pandas
write: the text in a string column, perhaps an id (string or integer) and a title, perhaps
nested in a struct (`--title-field meta.title`). The file's schema is checked before a row
is read (`ParquetColumnsError`, one failure for the file rather than a reject per row).
Only the columns the flags name are read (`ParquetFile.iter_batches(columns=…)`), through
a buffered stream, so a row group's other columns never reach memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.corpus.config import CorpusConfig

_BUFFER_BYTES = 1 << 20  # read column chunks a MiB at a time, not a row group at once


class ParquetColumnsError(ValueError):
    """The file's columns cannot give the records the flags ask for."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ParquetReadError(ValueError):
    """pyarrow could not read the file (not Parquet, a corrupt page, an unsupported codec)."""


@dataclass(frozen=True)
class _Column:
    selection: str  # what iter_batches(columns=…) is given: the name, or a dotted path
    path: tuple[str, ...]  # the top-level column, then the struct fields inside it


@dataclass
class ParquetBatch:
    """One batch's values as Python objects; `rows()` gives them a record at a time."""

    texts: list[Any]
    ids: list[Any] | None  # None: the file has no id column
    titles: list[Any] | None
    sizes: list[int | None]  # UTF-8 bytes of each text (None where null)
    bad_utf8: set[int]  # rows whose text is not UTF-8 (pyarrow checks none on reading)
    max_bytes: int
    missing: Any  # what a field the file does not have is

    @property
    def rows_count(self) -> int:
        return len(self.texts)

    @property
    def total_text_bytes(self) -> int:
        return sum(size for size in self.sizes if size is not None)

    def too_long(self, row: int) -> bool:
        size = self.sizes[row]
        return size is not None and size > self.max_bytes

    def text_bytes(self, row: int) -> int:
        return self.sizes[row] or 0

    def rows(self) -> Iterator[tuple[Any, Any, Any]]:
        ids = self.ids if self.ids is not None else [self.missing] * len(self.texts)
        titles = self.titles if self.titles is not None else [self.missing] * len(self.texts)
        return zip(self.texts, ids, titles, strict=True)


def _column(schema: pa.Schema, field: str) -> tuple[_Column, pa.DataType] | None:
    """Where `field` is in the schema: a top-level column, or a dotted path into structs."""
    if field in schema.names:
        return _Column(field, (field,)), schema.field(field).type
    top, *inner = field.split(".")
    if not inner or top not in schema.names:
        return None
    kind = schema.field(top).type
    for name in inner:
        if not pa.types.is_struct(kind) or kind.get_field_index(name) < 0:
            return None
        kind = kind.field(name).type
    return _Column(field, (top, *inner)), kind


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or (pa.types.is_string_view(kind))
    )


def _checked_columns(schema: pa.Schema, config: CorpusConfig) -> dict[str, _Column]:
    names = ", ".join(schema.names)
    columns: dict[str, _Column] = {}
    text = _column(schema, config.text_field)
    if text is None:
        raise ParquetColumnsError(
            f"no column {config.text_field!r} (its columns: {names}): name the one that holds "
            "the text with --text-field",
            "text_missing",
        )
    if not _is_text(text[1]):
        raise ParquetColumnsError(
            f"column {config.text_field!r} holds {text[1]}, not strings", "text_not_string"
        )
    columns["text"] = text[0]
    found = _column(schema, config.id_field)
    if found is not None:
        kind = found[1]
        if not (_is_text(kind) or pa.types.is_integer(kind)):
            raise ParquetColumnsError(
                f"column {config.id_field!r} holds {kind}, not strings or integers: name "
                "another with --id-field",
                "id_not_string_or_int",
            )
        columns["id"] = found[0]
    if config.title_field and (found := _column(schema, config.title_field)) is not None:
        if not _is_text(found[1]):
            raise ParquetColumnsError(
                f"column {config.title_field!r} holds {found[1]}, not strings",
                "title_not_string",
            )
        columns["title"] = found[0]
    return columns


def _values(batch: pa.RecordBatch, column: _Column) -> pa.Array:
    array = batch.column(column.path[0])
    for name in column.path[1:]:
        array = pc.struct_field(array, name)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


def _python_strings(array: pa.Array) -> tuple[list[Any], set[int]]:
    """The array's values; rows whose bytes are not UTF-8 come back None, numbered."""
    try:
        return array.to_pylist(), set()
    except UnicodeDecodeError:
        values, bad = [], set()
        for row in range(len(array)):
            try:
                values.append(array[row].as_py())
            except UnicodeDecodeError:
                values.append(None)
                bad.add(row)
        return values, bad


def open_parquet_records(
    handle: BinaryIO, config: CorpusConfig, batch_rows: int, missing: Any
) -> Iterator[ParquetBatch]:
    """The file's records, a batch at a time; ParquetColumnsError before the first one if
    the columns do not fit the flags, ParquetReadError where pyarrow cannot read on."""
    try:
        parquet = pq.ParquetFile(handle, buffer_size=_BUFFER_BYTES)
        columns = _checked_columns(parquet.schema_arrow, config)
        batches = parquet.iter_batches(
            batch_size=batch_rows,
            columns=sorted({c.selection for c in columns.values()}),
            use_threads=False,
        )
        for batch in batches:
            text = _values(batch, columns["text"])
            sizes = pc.binary_length(text)
            over = pc.fill_null(pc.greater(sizes, config.max_line_bytes), False)
            if pc.any(over).as_py():  # never turned into Python strings
                text = pc.if_else(over, pa.scalar(None, text.type), text)
            texts, bad = _python_strings(text)
            ids = _values(batch, columns["id"]).to_pylist() if "id" in columns else None
            titles = None
            if "title" in columns:
                titles, _ = _python_strings(_values(batch, columns["title"]))
            yield ParquetBatch(
                texts, ids, titles, sizes.to_pylist(), bad, config.max_line_bytes, missing
            )
    except pa.ArrowException as err:
        if isinstance(err, OSError):
            raise  # a failed read of the stored bytes, as for any other input
        raise ParquetReadError(str(err)) from err
