"""One corpus file → its Documents, or the reasons it has none (Beam-free).

JSON lines (`.jsonl`, `.json`, `.ndjson`, each plain or `.gz`, `.bz2`, `.zst`) stream in
bounded chunks, one record a line (`jsonl_documents`); Parquet streams batch by batch,
reading only the columns the flags name (`parquet_documents`). Every record goes through
`record_document`: its fields checked, its text cut into paragraphs
(`pipelines.text.corpustext`) and sentences (`pipelines.text.sentences`, as every stage),
and it becomes a Document, a reject (a bad record, with its file and line or row) or a
drop (no running text). A file that cannot be read to its end fails that input: what was
read before the fault is kept, and the stage exits 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipelines.beam import files
from pipelines.beam.documents import UnitTally
from pipelines.beam.inputs import name_not_utf8, name_under
from pipelines.books.reading import book_sentences
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.filestart import (
    CompressedData,
    JsonArray,
    WideEncoding,
    checked_start,
    json_lines_only,
)
from pipelines.corpus.parquet import (
    ID_MAX_BYTES,
    TITLE_MAX_BYTES,
    ParquetBatch,
    ParquetColumnsError,
    ParquetReadError,
    UnreadRows,
    open_parquet_records,
)
from pipelines.io.compressed import (
    InputReadError,
    LongLine,
    compression_suffix,
    decompressed_chunks,
    lines,
)
from pipelines.io.shown import first_control, shown
from pipelines.io.storage import Reader
from pipelines.text.corpustext import ParagraphCounts, record_paragraphs, without_controls
from schemas import Document, Reject

JSON_LINES_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSION_SUFFIXES = ("", ".gz", ".bz2", ".zst")
PARQUET_SUFFIX = ".parquet"
INPUT_SUFFIXES = (
    *(s + c for s in JSON_LINES_SUFFIXES for c in COMPRESSION_SUFFIXES),
    PARQUET_SUFFIX,
)
_TITLE_CHARS = 1000  # a title is a label: a longer one is cut (the text keeps every word)


class CorpusInputError(ValueError):
    """An input the stage cannot read at all, found before any work (exit 2)."""


def input_kind(path: str) -> str:
    """ "jsonl" or "parquet", by the file's suffix; CorpusInputError for any other file, or
    for a name that is not UTF-8 (ids, rejects and the manifest record it as text). A name
    holding a control character is refused with the other stages' inputs (`check_names`)."""
    if (refusal := name_not_utf8(path)) is not None:
        raise CorpusInputError(refusal)
    name = path.lower()
    if name.endswith(PARQUET_SUFFIX):
        return "parquet"
    if name.endswith(INPUT_SUFFIXES):
        return "jsonl"
    raise CorpusInputError(
        f"{path}: not a JSON lines or Parquet file by its name; bertkit corpus reads "
        f"{', '.join(INPUT_SUFFIXES)}. Give --input a glob that matches only those "
        "(e.g. 'DIR/*.jsonl.zst')"
    )


def record_file_name(path: str, root: str) -> str:
    """A file's name in fallback ids: its path under the inputs' common root, as it is.

    '/data/c4/en/part-0001.jsonl.zst' under '/data/c4' → 'en/part-0001.jsonl.zst' (the
    suffixes stay: 'a.jsonl' and 'a.parquet' are two files).
    """
    return name_under(path, root)


@dataclass(frozen=True)
class RecordFields:
    """One record's values as read: MISSING where the field is absent."""

    text: Any
    id: Any
    title: Any
    keys: tuple[str, ...] = ()  # the record's keys, for a message naming the ones it has
    # (reason, what): an id or title found bad before it was read (Parquet measures them in
    # Arrow), its value None here
    rejected: tuple[str, str] | None = None


MISSING = object()  # a field the record does not have (JSON null is None)
_READ_ERRORS = (InputReadError, OSError)


def field_value(record: dict[str, Any], field: str) -> Any:
    """`record[field]`, or the value at a dotted path into nested objects; MISSING if none.

    A key that holds the dots itself ("meta.title") wins over the path.
    """
    if field in record:
        return record[field]
    if "." not in field:
        return MISSING
    value: Any = record
    for key in field.split("."):
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def record_document(
    fields: RecordFields,
    fallback_id: str,
    path: str,
    position: str,
    config: CorpusConfig,
    tally: UnitTally,
) -> Document | None:
    """One record → a Document, or None after recording a reject or a drop.

    Ids are `<source>/<id>`: the record's id (a string, or an integer written in decimal:
    a float that holds a whole number too, as pandas writes integers beside nulls), or
    `fallback_id` (`<file>:<line or row>`) when the record has none (absent, null or NaN).
    """
    record_id = _record_id(fields.id, fallback_id, config, path, position, tally)
    if record_id is None:
        return None
    doc_id = f"{config.source}/{record_id}"
    if fields.rejected is not None:
        reason, what = fields.rejected
        tally.reject(Reject(doc_id, path, position, reason, what))
        return None
    text = fields.text
    if text is MISSING or text is None:
        what = "no" if text is MISSING else "a null"
        tally.reject(
            Reject(
                doc_id,
                path,
                position,
                "text_missing",
                f"{what} {config.text_field!r} field{_keys_note(fields.keys)}: name the field "
                "that holds the text with --text-field",
            )
        )
        return None
    if not isinstance(text, str):
        tally.reject(
            Reject(
                doc_id,
                path,
                position,
                "text_not_string",
                f"{config.text_field!r} is {_json_kind(text)}, not a string",
            )
        )
        return None
    title = fields.title
    if title is not MISSING and title is not None and not isinstance(title, str):
        error = f"{config.title_field!r} is {_json_kind(title)}, not a string"
        tally.reject(Reject(doc_id, path, position, "title_not_string", error))
        return None
    if isinstance(title, str) and _utf8_over(title, TITLE_MAX_BYTES):
        error = (
            f"{config.title_field!r} is {len(title.encode('utf-8', 'surrogatepass'))} bytes, "
            f"over the {TITLE_MAX_BYTES}-byte limit for titles"
        )
        tally.reject(Reject(doc_id, path, position, "title_too_long", error))
        return None
    counts = ParagraphCounts()
    paragraphs = record_paragraphs(text, config.min_paragraph_words, counts)
    sentences = book_sentences(paragraphs, tally)
    if counts.short:
        tally.count("paragraphs_short", counts.short)
    if counts.cut:
        tally.count("paragraphs_cut", counts.cut)
    if not sentences:
        tally.drop("no_text")
        return None
    # A title made from the id follows the title's rules: spaces collapsed, cut.
    label = _label(title) if isinstance(title, str) else ""
    return Document(
        id=doc_id,
        source=config.source,
        title=label or _label(record_id),
        sentences=tuple(sentences),
    )


def _label(text: str) -> str:
    """A title: control characters removed and every run of whitespace one space, as in
    the text (pipelines/text/corpustext.py), ends stripped, at most 1,000 characters."""
    return " ".join(without_controls(text).split())[:_TITLE_CHARS]


def _utf8_over(text: str, limit: int) -> bool:
    """Whether `text` takes more than `limit` bytes in UTF-8 (measured only when it may)."""
    return len(text) > limit // 4 and len(text.encode("utf-8", "surrogatepass")) > limit


def _record_id(
    value: Any, fallback: str, config: CorpusConfig, path: str, position: str, tally: UnitTally
) -> str | None:
    if value is MISSING or value is None or (isinstance(value, float) and math.isnan(value)):
        return fallback
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_FLOATS:
        value = int(value)  # 7.0 is the id 7, as the integer column it was written from gives
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # JSON's integers run to 4,300 digits: the id's limit holds too
    if isinstance(value, str) and _utf8_over(value, ID_MAX_BYTES):
        size = len(value.encode("utf-8", "surrogatepass"))
        error = f"{config.id_field!r} is {size} bytes, over the {ID_MAX_BYTES}-byte limit for ids"
        reason = "id_too_long"
    elif isinstance(value, str) and value.strip() and (control := first_control(value, "\t")):
        # A tab is kept (it breaks no line); a newline, NUL or other control character would
        # forge or cut the log lines and messages that name the record.
        error = (
            f"{config.id_field!r} holds a control character ({control}): an id names its "
            "record on one line (logs, rejects, the documents), so it is rejected, not changed"
        )
        reason = "id_control_character"
    elif isinstance(value, str) and value.strip():
        return value
    elif isinstance(value, str):
        error = f"{config.id_field!r} is an empty string: an id must name the record"
        reason = "id_empty"
    else:
        error = f"{config.id_field!r} is {_json_kind(value)}, not a string or an integer"
        if isinstance(value, float):
            error += f" ({_float_kind(value)})"
        reason = "id_not_string_or_int"
    tally.reject(Reject(f"{config.source}/{fallback}", path, position, reason, error))
    return None


# Up to 2**53 a float64 holds every integer; past it, two ids written as integers may have
# become one float.
_EXACT_FLOATS = 2**53


def _float_kind(value: float) -> str:
    if math.isinf(value):
        return f"{value}"
    if value.is_integer():
        return f"{value!r}, past 2**53, where a float no longer holds every integer"
    return f"{value!r}, not a whole number"


def _keys_note(keys: tuple[str, ...]) -> str:
    if not keys:
        return ""
    # A key may escape a lone surrogate ("\\ud800") or a newline: shown escaped, so the
    # reject is UTF-8 and its log line one line.
    listed = ", ".join(shown(key) for key in keys[:10]) + (", …" if len(keys) > 10 else "")
    return f" (the record's keys: {listed})"


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words: a string, a number, an array, an object, a boolean
    (true or false), null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    kinds = {int: "a number", float: "a number", str: "a string", list: "an array"}
    return kinds.get(type(value), "an object" if isinstance(value, dict) else type(value).__name__)


def _fail_unreadable(tally: UnitTally, path: str, err: BaseException, position: str) -> None:
    if isinstance(err, InputReadError):
        tally.fail_input(path, f"cannot be read to its end: {err}", err.reason, err.position)
    else:
        tally.fail_input(
            path, f"{path}: cannot be read at {position}: {err}", "unreadable_input", position
        )


# --- JSON lines ----------------------------------------------------------------------------


@dataclass
class _Hints:
    """What a file's rejects have said once already."""

    pretty_printed: bool = False


def jsonl_documents(
    path: str, name: str, config: CorpusConfig, tally: UnitTally, reader: Reader = files.READER
) -> Iterator[Document]:
    """Stream one JSON lines file (plain or compressed) into Documents, a line at a time.

    A line over --max-line-kb is rejected without being held (`lines` measures it as it
    streams past); a blank line is no record (counted: blank_lines).
    """
    tally.count("input_files")
    input_bytes = 0

    def counted(chunks: Iterator[bytes]) -> Iterator[bytes]:
        nonlocal input_bytes
        for chunk in chunks:
            input_bytes += len(chunk)
            yield chunk

    number = 0
    hints = _Hints()
    try:
        chunks = checked_start(counted(decompressed_chunks(reader, path)), path)
        raw_lines = json_lines_only(lines(chunks, config.max_line_bytes))
        for number, raw in enumerate(raw_lines, start=1):
            document = _line_document(raw, number, path, name, config, tally, hints)
            if document is not None:
                yield document
    except _READ_ERRORS as err:
        _fail_unreadable(tally, path, err, f"line {number + 1}")
    except WideEncoding as err:
        encoding, sign, iconv = err.args
        tally.fail_input(
            path,
            f"{path}: is {encoding} ({sign}), and JSON lines are UTF-8 (or UTF-16 with its "
            f"byte order mark): convert it, e.g. iconv -f {iconv} -t UTF-8 FILE > FILE.jsonl "
            "(decompressed first)",
            "unsupported_encoding",
            "line 1",
        )
    except CompressedData as err:
        tally.fail_input(path, _compressed_error(path, *err.args), "compressed_data", "byte 0")
    except JsonArray:
        tally.fail_input(
            path,
            f"{path}: holds one JSON array, not JSON lines (one object a line): write it as "
            "JSON lines, e.g. jq -c '.[]' FILE > FILE.jsonl",
            "json_array",
            "line 1",
        )
    tally.count("input_bytes", input_bytes)


def _compressed_error(path: str, kind: str, suffix: str, head: bytes) -> str:
    shown = head.hex(" ").upper()
    if compression_suffix(path):
        return (
            f"{path}: once decompressed, its bytes are {kind} data again (they start "
            f"{shown}): the file is compressed twice: decompress it one time, so that it "
            "holds what its name says"
        )
    return (
        f"{path}: its bytes are {kind}-compressed (they start {shown}), but its name does not "
        f"end in {suffix}, so it would be read as text: rename it {path.rsplit('/', 1)[-1]}"
        f"{suffix}"
    )


def _line_document(
    raw: bytes | LongLine,
    number: int,
    path: str,
    name: str,
    config: CorpusConfig,
    tally: UnitTally,
    hints: _Hints,
) -> Document | None:
    position = f"line {number}"
    if isinstance(raw, LongLine):
        tally.count("records")  # a record, if a long one: records = documents + drops + rejects
        error = (
            f"line {number} is {raw.length} bytes, over the {config.max_line_bytes}-byte "
            "limit (--max-line-kb): the record is skipped, the rest kept"
        )
        tally.reject(Reject(None, path, position, "line_too_long", error))
        return None
    if not raw or raw.isspace():
        tally.count("blank_lines")
        return None
    tally.count("records")
    fallback_id = f"{name}:{number}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        error = f"byte {err.start} of the line is not UTF-8 ({err.reason}): JSON lines are UTF-8"
        tally.reject(Reject(None, path, position, "invalid_utf8", error))
        return None
    if number == 1 and line.startswith("\ufeff"):
        line = line[1:]  # a byte order mark, as some Windows tools write
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as err:
        detail = _json_error(err, line)
        if not hints.pretty_printed and line.strip() == "{":
            hints.pretty_printed = True  # said once a file: its other lines fail as this one
            detail = (
                f"{detail}; the file looks like pretty-printed JSON (a {{ alone on line "
                f"{number}: an object over many lines), not JSON lines (one object a line): "
                "write it as JSON lines, e.g. jq -c . FILE > FILE.jsonl (jq -c '.KEY[]' "
                "where the records are an array under KEY)"
            )
        tally.reject(Reject(None, path, position, "not_json", f"not JSON: {detail}"))
        return None
    if not isinstance(record, dict):
        error = f"the line is {_json_kind(record)}, not a JSON object ({line[:60]!r})"
        tally.reject(Reject(None, path, position, "not_an_object", error))
        return None
    fields = RecordFields(
        field_value(record, config.text_field),
        field_value(record, config.id_field),
        field_value(record, config.title_field) if config.title_field else MISSING,
        tuple(record),
    )
    if "\\u" in line and not _encodable(fields):
        error = (
            "a string escapes a lone surrogate (\\ud800-\\udfff without its pair), which is "
            "no character and cannot be written as UTF-8"
        )
        tally.reject(Reject(None, path, position, "lone_surrogate", error))
        return None
    return record_document(fields, fallback_id, path, position, config, tally)


def _json_error(err: ValueError | RecursionError, line: str) -> str:
    """What json.loads said, at its column; a raw control character inside a string (a tab
    or a CR a writer left unescaped) said as such, with what to do."""
    if not isinstance(err, json.JSONDecodeError):
        return str(err)
    if err.msg.startswith("Invalid control character") and err.pos < len(line):
        return (
            f"a raw control character (U+{ord(line[err.pos]):04X}) inside a string at column "
            f"{err.colno}, which JSON forbids unescaped (\\t, \\n, \\u0000 are the escapes): "
            "rewrite the file with a JSON writer that escapes them; the record is skipped"
        )
    return f"{err.msg.removesuffix(' at')} at column {err.colno}"


def _encodable(fields: RecordFields) -> bool:
    """Whether every string field encodes as UTF-8 (a JSON escape can make one that does not)."""
    for value in (fields.text, fields.id, fields.title):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


# --- Parquet -------------------------------------------------------------------------------

# Rows pyarrow decodes at once: a batch's columns are held in Arrow (at most this many
# times --max-line-kb of text), then made Python strings a slice of at most
# SLICE_TEXT_BYTES at a time, every value measured first (pipelines/corpus/parquet.py).
PARQUET_BATCH_ROWS = 8


def parquet_documents(
    path: str, name: str, config: CorpusConfig, tally: UnitTally, reader: Reader = files.READER
) -> Iterator[Document]:
    """Stream one Parquet file into Documents, a batch of rows at a time (only the columns
    the flags name are read; rows are numbered from 0, as pyarrow and pandas number them).

    The columns are checked against the file's schema first: a text column that is missing
    or holds no strings fails the file (one reject, not one per row), as does an id or title
    column of the wrong type. A file without the id column takes `<file>:<row>` ids.
    """
    tally.count("input_files")
    row = 0
    damaged = False
    try:
        with reader.open(path) as handle:
            items = open_parquet_records(handle, config, PARQUET_BATCH_ROWS, MISSING)
            for batch in items:
                if isinstance(batch, UnreadRows):
                    _unread_rows(batch, path, damaged, tally)
                    damaged = damaged or batch.reason == "corrupt_input"
                    row = batch.stop
                    continue
                row = batch.first_row
                for offset, (text, record_id, title) in enumerate(batch.rows()):
                    document = _row_document(
                        batch,
                        offset,
                        RecordFields(
                            text, record_id, title, rejected=batch.field_rejects.get(offset)
                        ),
                        path,
                        name,
                        config,
                        tally,
                    )
                    if document is not None:
                        yield document
                tally.count("input_text_bytes", batch.total_text_bytes)
                row = batch.first_row + batch.rows_count
    except ParquetColumnsError as err:
        tally.fail_input(path, f"{path}: {err}", err.reason, "schema")
    except ParquetReadError as err:
        error = f"{path}: cannot be read as Parquet (its footer, the file's metadata): {err}"
        tally.fail_input(path, error, "corrupt_input", "footer")
    except _READ_ERRORS as err:
        _fail_unreadable(tally, path, err, f"row {row}")


def _unread_rows(rows: UnreadRows, path: str, damaged: bool, tally: UnitTally) -> None:
    """A row group not read: a reject of its rows (counted: rows_unread); damage fails the
    input (once a file: exit 1), a page over the limit does not."""
    tally.count("rows_unread", rows.count)
    if rows.reason == "corrupt_input":
        kept = f" (rows {rows.first}-{rows.start - 1} before the damage are kept)"
        error = (
            f"{path}: {rows.position} is damaged: {rows.error}"
            f"{kept if rows.start > rows.first else ''}; the file's other row groups are read"
        )
        if not damaged:
            tally.fail_input(path, error, rows.reason, rows.position)
            return
    else:
        error = f"{rows.position}: {rows.error}"
    tally.reject(Reject(None, path, rows.position, rows.reason, error))


def _row_document(
    batch: ParquetBatch,
    offset: int,
    fields: RecordFields,
    path: str,
    name: str,
    config: CorpusConfig,
    tally: UnitTally,
) -> Document | None:
    number = batch.first_row + offset
    position = f"row {number}"
    tally.count("records")  # every row read, over the limit too
    if batch.too_long(offset):
        error = (
            f"row {number}'s text is {batch.text_bytes(offset)} bytes, over the "
            f"{config.max_line_bytes}-byte limit (--max-line-kb): the record is skipped, "
            "the rest kept"
        )
        tally.reject(Reject(None, path, position, "text_too_long", error))
        return None
    if offset in batch.bad_utf8:
        error = f"row {number}'s text is not UTF-8, as a Parquet string must be"
        tally.reject(Reject(None, path, position, "invalid_utf8", error))
        return None
    return record_document(fields, f"{name}:{number}", path, position, config, tally)
