"""Parquet corpus files, read a batch of rows at a time with only the columns named (Beam-free).

What `datasets.Dataset.to_parquet`, DuckDB's `COPY … TO 'x.parquet'`, Spark and pandas
write: the text in a string column, perhaps an id (string, integer, or a float64 of whole
numbers as pandas writes an integer column with nulls) and a title, perhaps nested in a
struct (`--title-field meta.title`). The file's schema is checked before a row is read
(`ParquetColumnsError`, one failure for the file rather than a reject per row). Only the
columns the flags name are read (`ParquetFile.iter_batches(columns=…)`), through a 1 MiB
buffered stream (`pre_buffer=False`: pyarrow's default reads a row group's column chunks
whole), so a row group's other columns never reach memory.

The file is read a row group at a time. Before one is read, the page headers of each of
its column chunks it reads are walked (pipelines/corpus/pages.py), whatever the footer says
of the chunk's size: pyarrow decompresses a page whole, so a row group with a page over
`page_limit` is not read, its rows one `UnreadRows` (page_too_large). A footer that places a
chunk outside the file's pages, or whose pages run past the chunk's end, and damage pyarrow
meets in a row group (a corrupt page, a page header that does not parse) are an
`UnreadRows` too (corrupt_input), and the next row group is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.pages import Page, PageHeaderError, chunk_pages

_BUFFER_BYTES = 1 << 20  # read column chunks a MiB at a time, not a row group at once
# The most bytes of strings a slice of a batch turns into Python objects at once (a row
# over it is a slice of its own): rows are bounded in bytes, not only in count.
SLICE_TEXT_BYTES = 32 << 20
# An id or a title is a label: a longer value is a reject (id_too_long, title_too_long),
# measured in Arrow before it is read. A title under it is still cut to 1,000 characters.
ID_MAX_BYTES = 4 << 10
TITLE_MAX_BYTES = 64 << 10
# The largest page (once decompressed) a row group may hold to be read: pyarrow decompresses
# a page whole, and a page of a few hundred compressed bytes can stand for gigabytes. A
# page holds at least one value, and pyarrow's writer puts 1,024 values in one (100 KB
# texts: 100 MB pages), so the bound is what a batch of rows may already hold in Arrow
# (PAGE_TEXTS values of --max-line-kb), at least 64 MiB.
PAGE_TEXTS = 8
MIN_PAGE_LIMIT = 64 << 20
# How far a chunk's last page may run past the chunk's end as its footer gives it: parquet-mr
# before 1.2.9 left the dictionary page's header (at most 100 bytes) out of the size, and
# pyarrow reads that far on for such files (PARQUET-816). Further is damage.
_OVERRUN_BYTES = 100


def page_limit(config: CorpusConfig) -> int:
    """The largest page, in bytes once decompressed, that a row group may hold to be read."""
    return max(MIN_PAGE_LIMIT, PAGE_TEXTS * config.max_line_bytes)


class ParquetColumnsError(ValueError):
    """The file's columns cannot give the records the flags ask for."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ParquetReadError(ValueError):
    """pyarrow could not read the file's footer (not Parquet, cut short, damaged)."""


@dataclass(frozen=True)
class UnreadRows:
    """Rows of a row group left unread: a page over the limit, or damage pyarrow met."""

    group: int  # the row group, from 0
    first: int  # its first row (rows count from 0 over the file)
    stop: int  # one past its last row
    start: int  # the first row left unread: those before it were read
    reason: str  # page_too_large or corrupt_input
    error: str

    @property
    def position(self) -> str:
        if self.stop <= self.first:
            return f"row group {self.group} (no rows)"
        return f"row group {self.group} (rows {self.first}-{self.stop - 1})"

    @property
    def count(self) -> int:
        return self.stop - self.start


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

    first_row: int  # the file's row number of texts[0]
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


def _is_number(kind: pa.DataType) -> bool:
    """Integers, or floats (pandas writes an integer column with nulls as float64): measured
    by nothing, made Python numbers; `record_document` takes a whole float as an integer."""
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


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
        if not (_is_text(kind) or _is_number(kind)):
            raise ParquetColumnsError(
                f"column {config.id_field!r} holds {kind}, not strings, integers or floats: "
                "name another with --id-field",
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
    if pa.types.is_string_view(array.type):
        # Arrow's compute functions (binary_length) have no string_view kernel: the batch's
        # strings are copied once into offsets and bytes, bounded as the batch is.
        array = array.cast(pa.large_string())
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
    batch: pa.RecordBatch,
    columns: dict[str, _Column],
    config: CorpusConfig,
    missing: Any,
    first_row: int,
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
        if not _is_number(array.type):
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
            if _is_number(array.type):
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
            first_row + start,
            texts,
            values.get("id"),
            values.get("title"),
            sizes[start:stop],
            bad,
            config.max_line_bytes,
            missing,
            rejects,
        )


class _WatchedFile:
    """The stored file as pyarrow reads it, keeping what the file itself raised: pyarrow
    raises a plain OSError for damage it finds (a corrupt page), and the file's own errors
    (a dropped connection) as they are, so the error alone cannot tell them apart."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.errors: list[BaseException] = []

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._handle, method)(*args)
        except Exception as err:
            self.errors.append(err)
            raise

    def read(self, size: int = -1) -> bytes:
        return self._call("read", size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._call("seek", offset, whence)

    def tell(self) -> int:
        return self._call("tell")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def close(self) -> None:
        pass  # the caller's handle: its caller closes it

    def raised(self, err: BaseException) -> bool:
        """Whether `err` is (or comes from) an error the stored file raised."""
        seen: BaseException | None = err
        while seen is not None:
            if any(seen is own for own in self.errors):
                return True
            seen = seen.__cause__ or seen.__context__
        return False


_PYARROW_ERRORS = (pa.ArrowException, OSError)


def said(err: BaseException) -> str:
    """pyarrow's message on one line, its control characters escaped, without its full stop
    (a damaged footer's says "don't know what type: \\x0f\\n")."""
    text = " ".join(str(err).split()).rstrip(".")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def open_parquet_records(
    handle: BinaryIO, config: CorpusConfig, batch_rows: int, missing: Any
) -> Iterator[ParquetBatch | UnreadRows]:
    """The file's records, a slice of a batch at a time, row group by row group (a batch
    never spans two), and an UnreadRows for each row group not read; ParquetColumnsError
    before the first one if the columns do not fit the flags, ParquetReadError if the footer
    cannot be read, the file's own error where reading it fails."""
    stored = _WatchedFile(handle)
    try:
        parquet = pq.ParquetFile(stored, buffer_size=_BUFFER_BYTES, pre_buffer=False)
    except _PYARROW_ERRORS as err:
        if stored.raised(err):
            raise
        raise ParquetReadError(said(err)) from err
    columns = _checked_columns(parquet.schema_arrow, config)
    selection = sorted({c.selection for c in columns.values()})
    metadata = parquet.metadata
    # The pages end where the footer starts: its length and the 8 bytes after it.
    data_end = stored.seek(0, 2) - 8 - metadata.serialized_size
    first = 0
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        values = _values_stored(metadata.row_group(group), columns["text"].selection)
        if rows != values:  # the footer disagrees with itself: neither number is trusted
            stop = first + max(values, 0)  # as pyarrow numbers the rows after it
            error = (
                f"its footer says it holds {rows:,} rows, but its column "
                f"{columns['text'].selection!r} holds {values:,} values: the footer is "
                "damaged, so the row group is not read"
            )
            yield UnreadRows(group, first, stop, first, "corrupt_input", error)
            first = stop
            continue
        stop = first + rows
        if rows == 0:
            continue  # an empty row group, as its column says too: nothing to read
        found = _large_page(stored, metadata.row_group(group), selection, config, data_end)
        if found is not None:
            yield UnreadRows(group, first, stop, first, *found)
            first = stop
            continue
        read = first
        # Only what pyarrow raises while it reads the file is damage: an error in the code
        # that measures a batch read is no fault of the file, and is not called one.
        batches = _read_batches(parquet, group, selection, batch_rows)
        while True:
            try:
                batch = next(batches, None)
            except _PYARROW_ERRORS as err:
                if stored.raised(err):
                    raise
                error = f"pyarrow cannot read rows {read}-{stop - 1}: {said(err)}"
                yield UnreadRows(group, first, stop, read, "corrupt_input", error)
                break
            if batch is None:
                break
            yield from _bounded_batches(batch, columns, config, missing, read)
            read += batch.num_rows
        first = stop


def _read_batches(
    parquet: pq.ParquetFile, group: int, selection: list[str], batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The row group's batches, pyarrow's errors raised by `next`, never on the call."""
    yield from parquet.iter_batches(
        batch_size=batch_rows, row_groups=[group], columns=selection, use_threads=False
    )


def _values_stored(group: pq.RowGroupMetaData, path: str) -> int:
    """The values the row group's chunk of the column at `path` holds, by the footer: one a
    row for a column that is not a list (nulls too), as the text column is."""
    for index in range(group.num_columns):
        chunk = group.column(index)
        if chunk.path_in_schema == path:
            return chunk.num_values
    raise ParquetReadError(f"the footer lists no column chunk {path!r} in a row group")


def _large_page(
    stored: BinaryIO,
    group: pq.RowGroupMetaData,
    selection: list[str],
    config: CorpusConfig,
    data_end: int,
) -> tuple[str, str] | None:
    """(reason, error) if a column the row group is read for holds a page over the limit
    (page_too_large), or its pages do not lie where its footer says (corrupt_input); None if
    neither.

    Every chunk read is walked, whatever its footer claims of its size: the footer is
    metadata a writer (or damage) may get wrong, the page headers are what pyarrow reads.
    The walk covers the bytes pyarrow reads as the chunk's pages (from the dictionary page
    if it comes first, `total_compressed_size` of them); a chunk placed outside the file's
    pages, or whose pages run past its end, is damage of the row group."""
    limit = page_limit(config)
    for index in range(group.num_columns):
        chunk = group.column(index)
        path = chunk.path_in_schema
        if not any(path == name or path.startswith(f"{name}.") for name in selection):
            continue
        start = chunk.data_page_offset
        dictionary = chunk.dictionary_page_offset if chunk.has_dictionary_page else None
        if dictionary is not None and 0 < dictionary < start:
            start = dictionary  # as pyarrow starts the chunk
        size = chunk.total_compressed_size
        if start < 4 or size <= 0 or start + size > data_end:
            return "corrupt_input", (
                f"the footer places column {path!r}'s {size:,} bytes at byte {start:,}, "
                f"outside the file's pages (bytes 4 to {data_end:,})"
            )
        end = start
        try:
            for page in chunk_pages(stored, start, size):
                end = page.data_offset + page.compressed
                if page.uncompressed > limit:
                    return "page_too_large", _too_large(path, page, limit, group.num_rows)
        except PageHeaderError as err:
            return "corrupt_input", f"a page header of column {path!r} does not parse: {err}"
        if end > start + size + _OVERRUN_BYTES:
            return "corrupt_input", (
                f"the pages of column {path!r} run to byte {end:,}, past the end its footer "
                f"gives (byte {start + size:,}): the footer does not describe them"
            )
    return None


def _too_large(path: str, page: Page, limit: int, rows: int) -> str:
    return (
        f"column {path!r} holds a {page.kind} of {page.uncompressed:,} bytes once "
        f"decompressed (at byte {page.offset}), over the {limit:,}-byte limit for a "
        f"page ({PAGE_TEXTS} times --max-line-kb, at least 64 MiB): pyarrow "
        f"decompresses a page whole, so the row group's {rows} rows are "
        f"skipped unread; --max-line-kb {-(-page.uncompressed // (PAGE_TEXTS << 10))} "
        "reads them"
    )
