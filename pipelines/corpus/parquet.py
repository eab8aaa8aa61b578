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
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.corpus.config import CorpusConfig

_BUFFER_BYTES = 1 << 20  # read column chunks a MiB at a time, not a row group at once
# The most bytes of strings a slice of a batch turns into Python objects at once (a row
# over it is a slice of its own): rows are bounded in bytes, not only in count.
SLICE_TEXT_BYTES = 32 << 20
# An id or a title is a label: a longer value is a reject (id_too_long, title_too_long),
# measured in Arrow before it is read. A title under it is still cut to 1,000 characters.
ID_MAX_BYTES = 4 << 10
TITLE_MAX_BYTES = 64 << 10


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
    """A slice of a batch's rows as Python objects; `rows()` gives them a record at a time.

    A value over its limit (text over --max-line-kb, an id or a title over theirs) or not
    UTF-8 is None here: it was measured in Arrow and never made a Python string.
    """

    texts: list[Any]
    ids: list[Any] | None  # None: the file has no id column
    titles: list[Any] | None
    sizes: list[int | None]  # UTF-8 bytes of each text (None where null)
    bad_utf8: set[int]  # rows whose text is not UTF-8 (pyarrow checks none on reading)
    max_bytes: int
    missing: Any  # what a field the file does not have is
    # rows whose id or title is rejected: (reason, what is wrong with the field)
    field_rejects: dict[int, tuple[str, str]] = field(default_factory=dict)

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


def _byte_lengths(array: pa.Array) -> list[int | None]:
    """Each string's UTF-8 bytes, from the array's offsets (no value is copied)."""
    return pc.binary_length(array).to_pylist()


def _over(sizes: list[int | None], limit: int) -> set[int]:
    return {row for row, size in enumerate(sizes) if size is not None and size > limit}


def _python_strings(array: pa.Array, skip: set[int]) -> tuple[list[Any], set[int]]:
    """The array's values, None for the rows in `skip` (never turned into strings); rows
    whose bytes are not UTF-8 come back None, numbered."""
    if not skip:
        try:
            return array.to_pylist(), set()
        except UnicodeDecodeError:
            pass
    values, bad = [], set()
    for row in range(len(array)):
        if row in skip:
            values.append(None)
            continue
        try:
            values.append(array[row].as_py())
        except UnicodeDecodeError:
            values.append(None)
            bad.add(row)
    return values, bad


def _slices(weights: list[int], budget: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive rows whose weights add up to at most `budget` (a row
    heavier than it alone)."""
    start, held = 0, 0
    for row, weight in enumerate(weights):
        if row > start and held + weight > budget:
            yield start, row
            start, held = row, 0
        held += weight
    if start < len(weights):
        yield start, len(weights)


def _bounded_batches(
    batch: pa.RecordBatch, columns: dict[str, _Column], config: CorpusConfig, missing: Any
) -> Iterator[ParquetBatch]:
    """One record batch → slices of it as Python objects, each holding at most
    SLICE_TEXT_BYTES of strings (or one row), every value measured first in Arrow."""
    text = _values(batch, columns["text"])
    sizes = _byte_lengths(text)
    text_over = _over(sizes, config.max_line_bytes)
    weights = [0 if row in text_over else size or 0 for row, size in enumerate(sizes)]
    fields: dict[str, tuple[pa.Array, set[int]]] = {}
    for name, limit in (("id", ID_MAX_BYTES), ("title", TITLE_MAX_BYTES)):
        if name not in columns:
            continue
        array = _values(batch, columns[name])
        over: set[int] = set()
        if not pa.types.is_integer(array.type):
            lengths = _byte_lengths(array)
            over = _over(lengths, limit)
            for row, size in enumerate(lengths):
                if row not in over:
                    weights[row] += size or 0
        fields[name] = (array, over)
    for start, stop in _slices(weights, SLICE_TEXT_BYTES):
        rows = range(start, stop)
        texts, bad = _python_strings(
            text.slice(start, stop - start), {r - start for r in text_over if r in rows}
        )
        values: dict[str, list[Any]] = {}
        rejects: dict[int, tuple[str, str]] = {}
        for name, (array, over) in fields.items():
            part = array.slice(start, stop - start)
            skip = {r - start for r in over if r in rows}
            if pa.types.is_integer(array.type):
                values[name] = part.to_pylist()
                continue
            values[name], not_utf8 = _python_strings(part, skip)
            flag = config.id_field if name == "id" else config.title_field
            limit = ID_MAX_BYTES if name == "id" else TITLE_MAX_BYTES
            for row in sorted(skip | not_utf8):
                if row in rejects:
                    continue  # the id's reject stands; the title is not looked at
                if row in skip:
                    size = pc.binary_length(part[row]).as_py()
                    what = f"{flag!r} is {size} bytes, over the {limit}-byte limit for {name}s"
                    rejects[row] = (f"{name}_too_long", what)
                else:
                    rejects[row] = (
                        "invalid_utf8",
                        f"{flag!r} is not UTF-8, as a Parquet string must be",
                    )
        yield ParquetBatch(
            texts,
            values.get("id"),
            values.get("title"),
            sizes[start:stop],
            bad,
            config.max_line_bytes,
            missing,
            rejects,
        )


def open_parquet_records(
    handle: BinaryIO, config: CorpusConfig, batch_rows: int, missing: Any
) -> Iterator[ParquetBatch]:
    """The file's records, a slice of a batch at a time; ParquetColumnsError before the
    first one if the columns do not fit the flags, ParquetReadError where pyarrow cannot
    read on."""
    try:
        parquet = pq.ParquetFile(handle, buffer_size=_BUFFER_BYTES)
        columns = _checked_columns(parquet.schema_arrow, config)
        batches = parquet.iter_batches(
            batch_size=batch_rows,
            columns=sorted({c.selection for c in columns.values()}),
            use_threads=False,
        )
        for batch in batches:
            yield from _bounded_batches(batch, columns, config, missing)
    except pa.ArrowException as err:
        if isinstance(err, OSError):
            raise  # a failed read of the stored bytes, as for any other input
        raise ParquetReadError(str(err)) from err
