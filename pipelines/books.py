"""Extract sentence-split documents from book files.

`--format files` (default): one book per file (.txt, .txt.gz, .txt.bz2). Line endings are
normalised, Project Gutenberg's header and licence are stripped, hard-wrapped lines are
reflowed into paragraphs, headings dropped, and paragraphs split into sentences. Bytes that
are not UTF-8 are decoded as cp1252 (then Latin-1) and the book is counted as such.

`--format lines`: the BookCorpus mirror format, one sentence per line. A blank line ends a
document; a file without blank lines is cut every `--lines_per_document` lines (the mirrors
lost the book boundaries; fixed windows are the honest, deterministic choice).

In both formats a line over `--max_line_kb` is no text: it is rejected (`line_too_long`),
never held in memory whole, and the rest of the file is kept. A paragraph over 1 Mi
characters (a book without blank lines) is cut at line boundaries, and a sentence over
16,384 characters after the last space of each window, as `bertkit examples` cuts them
(counts: paragraphs_cut, sentences_cut), so memory is bounded whatever their length.

Writes DIR/documents-*.parquet (Document schema), DIR/_rejects/ and, last, DIR/_manifest.json.
Exits 1 if any input could not be read to its end.

    bertkit books --input 'data/books/*.txt' --output out/books
    python -m pipelines.books --input 'bookcorpus/*.txt' --format lines --output out/bookcorpus

Flags not listed below go to Beam's PipelineOptions (e.g. --runner DataflowRunner).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

import apache_beam as beam

from pipelines.beam import files
from pipelines.beam.documents import (
    DEFAULT_MAX_FILE_TEXT_BYTES,
    DOCUMENTS_STAGE_PATHS,
    DocumentFileWriter,
    DocumentStageFlags,
    UnitTally,
    expand_inputs,
    finish_unit,
    prepare_output_dir,
    run_documents_pipeline,
)
from pipelines.beam.progress import (
    DOCUMENTS_EXTRACTED,
    INPUT_BYTES_READ,
    INPUT_FILES_READ,
    StageCounters,
    counting_reader,
)
from pipelines.beam.runner import parse_stage, stage_main
from pipelines.bert.sentence_cuts import cut_sentence
from pipelines.command.flags import AT_LEAST_1, ZERO_OR_MORE, option
from pipelines.command.progress import Phase
from pipelines.io.compressed import InputReadError, LongLine, decompressed_chunks, lines
from pipelines.io.storage import Reader
from pipelines.text.booktext import (
    MAX_LINE_BYTES,
    BookTextError,
    DecodedBook,
    LongTextLine,
    cut_long_paragraphs,
    decode_book,
    drop_long_lines,
    iter_book_paragraphs,
    line_documents,
)
from pipelines.text.gutenberg import book_title, strip_gutenberg
from pipelines.text.sentences import split_sentences
from schemas import Document, Reject

STAGE = "books"
FORMATS = ("files", "lines")
_COMPRESSED_SUFFIXES = (".gz", ".bz2")
# A book far beyond any real one (War and Peace is 3.2 MB) is a wrong input, not a book.
MAX_BOOK_BYTES = 64 << 20
# What the extraction DoFn counts (Beam counters in the "bertkit" namespace).
COUNTERS = (INPUT_BYTES_READ, INPUT_FILES_READ, DOCUMENTS_EXTRACTED)


def progress_phases(input_bytes: int) -> list[Phase]:
    """The progress line: stored bytes read of the inputs' total, files, documents."""
    shown = ((INPUT_FILES_READ, "files"), (DOCUMENTS_EXTRACTED, "documents"))
    rate = (DOCUMENTS_EXTRACTED, "documents")
    return [Phase("read", INPUT_BYTES_READ, input_bytes, "read", True, rate, shown)]


@dataclass(frozen=True)
class BooksConfig:
    """Everything that shapes the output; recorded in the manifest."""

    format: str = "files"
    min_paragraph_words: int = 3
    lines_per_document: int = 1000
    unit_bytes: int = 64 << 20
    max_file_text_bytes: int = DEFAULT_MAX_FILE_TEXT_BYTES
    max_line_bytes: int = MAX_LINE_BYTES


@dataclass(frozen=True)
class BooksFlags(DocumentStageFlags):
    """`bertkit books`'s command line."""

    format: str = option(
        "files",
        help="files: one book per file; lines: one sentence per line (BookCorpus)",
        choices=FORMATS,
    )
    min_paragraph_words: int = option(
        3, help="drop paragraphs with fewer words", bounds=ZERO_OR_MORE
    )
    lines_per_document: int = option(
        1000,
        help="lines format, files without blank lines: cut a document every N lines",
        bounds=AT_LEAST_1,
    )
    unit_mb: int = option(
        64,
        help="group book files into units of work of about this many MB (0: one file each)",
        bounds=ZERO_OR_MORE,
    )
    max_line_kb: int = option(
        MAX_LINE_BYTES >> 10,
        help="reject a line over this many KiB (no sentence is that long)",
        bounds=AT_LEAST_1,
    )

    def config(self) -> BooksConfig:
        return BooksConfig(
            format=self.format,
            min_paragraph_words=self.min_paragraph_words,
            lines_per_document=self.lines_per_document,
            unit_bytes=self.unit_mb << 20,
            max_file_text_bytes=self.file_mb << 20,
            max_line_bytes=self.max_line_kb << 10,
        )


def book_name(path: str, root: str) -> str:
    """Stable id part of a book file: its path under the inputs' common root, no suffixes.

    '/data/gutenberg/alice29.txt.gz' under '/data' → 'gutenberg/alice29'.
    """
    name = (
        path[len(root) :].lstrip("/")
        if root and path.startswith(root)
        else posixpath.basename(path)
    )
    for suffix in _COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return name.removesuffix(".txt")


def common_root(paths: list[str]) -> str:
    """The deepest directory that holds every input (ids stay unique across folders)."""
    scheme, sep, _ = paths[0].partition("://")
    prefix = scheme + sep if sep else ""
    if any(not p.startswith(prefix) for p in paths):
        return ""
    directories = [posixpath.dirname(p[len(prefix) :]) for p in paths]
    return prefix + posixpath.commonpath(directories) if directories[0] else ""


def read_book_bytes(path: str, reader: Reader = files.READER) -> bytes:
    """The file's bytes, decompressed by suffix; InputReadError if damaged or too large."""
    chunks, size = [], 0
    for chunk in decompressed_chunks(reader, path):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BOOK_BYTES:
            raise InputReadError(
                path, f"byte {size}", f"over {MAX_BOOK_BYTES >> 20} MB: not one book "
                "(use --format lines for corpus files)", "too_large",
            )  # fmt: skip
    return b"".join(chunks)


# Damaged compression (InputReadError) or a file that vanished or cannot be opened (OSError).
_READ_ERRORS = (InputReadError, OSError)


def _fail_unreadable(tally: UnitTally, path: str, err: BaseException) -> None:
    if isinstance(err, InputReadError):
        tally.fail_input(path, f"cannot be read to its end: {err}", err.reason, err.position)
    else:
        tally.fail_input(path, f"{path}: cannot be read: {err}", "unreadable_input", "file")


def book_document(
    path: str, name: str, config: BooksConfig, tally: UnitTally, reader: Reader = files.READER
) -> Document | None:
    """One book file → one Document, or None after recording why not."""
    tally.count("input_files")
    doc_id = f"books/{name}"
    decoded = _decoded_book(path, doc_id, tally, reader)
    if decoded is None:
        return None
    text, long_lines = drop_long_lines(decoded.text, config.max_line_bytes)
    del decoded  # the book is held as few times as its steps need (text and body)
    for line in long_lines:
        error = line.error(config.max_line_bytes)
        tally.reject(Reject(doc_id, path, f"line {line.number}", "line_too_long", error))
    title = book_title(text, fallback=posixpath.basename(name))
    body, had_boilerplate = strip_gutenberg(text)
    del text
    if had_boilerplate:
        tally.count("gutenberg_boilerplate_removed")
    body, paragraphs_cut = cut_long_paragraphs(body)
    if paragraphs_cut:
        tally.count("paragraphs_cut", paragraphs_cut)
    paragraphs = iter_book_paragraphs(body, min_words=config.min_paragraph_words)
    sentences = book_sentences(paragraphs, tally)
    if not sentences:
        tally.drop("no_running_text")
        return None
    return Document(id=doc_id, source="books", title=title, sentences=tuple(sentences))


def _decoded_book(path: str, doc_id: str, tally: UnitTally, reader: Reader) -> DecodedBook | None:
    """The book file decoded, or None after recording why not (its bytes go on return)."""
    try:
        data = read_book_bytes(path, reader)
    except _READ_ERRORS as err:
        _fail_unreadable(tally, path, err)
        return None
    tally.count("input_bytes", len(data))
    try:
        decoded = decode_book(data)
    except BookTextError as err:
        tally.reject(Reject(doc_id, path, "file", "not_text", str(err)))
        return None
    if decoded.used_fallback:
        tally.count("decoded_with_fallback")
    return decoded


def book_sentences(paragraphs: Iterable[str], tally: UnitTally) -> list[str]:
    """The paragraphs' sentences; one over the examples stage's bound is cut as it cuts them.

    `bertkit examples` would cut it anyway (pipelines/bert/sentence_cuts.py: after the last
    space of each 16,384-character window); cut here, no sentence of a Document is longer.
    The pieces are stripped, as every sentence is (so `" ".join` gives the sentence back),
    and each sentence cut counts once (sentences_cut).
    """
    sentences: list[str] = []
    for paragraph in paragraphs:
        for sentence in split_sentences(paragraph):
            pieces = cut_sentence(sentence)
            if len(pieces) > 1:
                tally.count("sentences_cut")
                pieces = [piece.strip() for piece in pieces]
            sentences += pieces
    return sentences


def line_file_documents(
    path: str, name: str, config: BooksConfig, tally: UnitTally, reader: Reader = files.READER
):
    """Stream one BookCorpus-style file (one sentence per line) into Documents."""
    tally.count("input_files")
    fallback_lines = input_bytes = 0

    def counted(chunks):
        nonlocal input_bytes
        for chunk in chunks:
            input_bytes += len(chunk)
            yield chunk

    def decoded_lines():
        nonlocal fallback_lines
        raw_lines = lines(counted(decompressed_chunks(reader, path)), config.max_line_bytes)
        for number, raw in enumerate(raw_lines, start=1):
            if isinstance(raw, LongLine):
                error = LongTextLine(number, raw.length).error(config.max_line_bytes)
                tally.reject(Reject(None, path, f"line {number}", "line_too_long", error))
                yield ""  # it ends the document: the lines either side were not adjacent
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                fallback_lines += 1
                yield _decode_with_fallback(raw)

    try:
        for number, sentences in enumerate(
            line_documents(decoded_lines(), config.lines_per_document)
        ):
            yield Document(
                id=f"bookcorpus/{name}/{number}",
                source="bookcorpus",
                title=f"{posixpath.basename(name)} #{number}",
                sentences=tuple(sentences),
            )
    except _READ_ERRORS as err:
        _fail_unreadable(tally, path, err)
    tally.count("input_bytes", input_bytes)
    if fallback_lines:
        tally.count("lines_decoded_with_fallback", fallback_lines)


def _decode_with_fallback(raw: bytes) -> str:
    """Decode one line as decode_book would: cp1252, and Latin-1 for cp1252's holes."""
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class _ExtractBooksFn(beam.DoFn):
    """One unit (a group of book files) → its Parquet files and rejects; yields a summary."""

    def __init__(self, output_dir: str, root: str, config: BooksConfig) -> None:
        self._output_dir = output_dir
        self._root = root
        self._config = config
        self._counters: StageCounters | None = None

    def setup(self) -> None:
        self._counters = StageCounters(COUNTERS)
        # Stored bytes as they are read: the progress line's "read" and its ETA.
        self._reader = counting_reader(files.READER, self._counters, INPUT_BYTES_READ)

    def process(self, unit: tuple[int, list[str]]):
        number, paths = unit
        tally = UnitTally(f"{number:05d}")
        writer = DocumentFileWriter(self._output_dir, tally.unit, self._config.max_file_text_bytes)
        counters, reader = self._counters, self._reader
        assert counters is not None
        for path in paths:
            name = book_name(path, self._root)
            counters.add(INPUT_FILES_READ)
            if self._config.format == "lines":
                for document in line_file_documents(path, name, self._config, tally, reader):
                    writer.add(document)
                    counters.add(DOCUMENTS_EXTRACTED)
            elif (document := book_document(path, name, self._config, tally, reader)) is not None:
                writer.add(document)
                counters.add(DOCUMENTS_EXTRACTED)
        summary = finish_unit(self._output_dir, tally, writer.close())
        counters.flush()
        yield summary


def plan_units(inputs: list[dict], unit_bytes: int) -> list[tuple[int, list[str]]]:
    """Group the sorted input files into units of about `unit_bytes`: fixed by inputs alone."""
    units: list[tuple[int, list[str]]] = []
    current: list[str] = []
    size = 0
    for item in inputs:
        if current and size + item["bytes"] > unit_bytes:
            units.append((len(units), current))
            current, size = [], 0
        current.append(item["path"])
        size += item["bytes"]
    if current:
        units.append((len(units), current))
    return units


class ExtractBooks(beam.PTransform):
    """Book files → documents written under `output_dir`; outputs one summary per unit."""

    def __init__(self, inputs: list[dict], output_dir: str, config: BooksConfig) -> None:
        super().__init__()
        self._inputs = inputs
        self._output_dir = output_dir
        self._config = config

    def expand(self, pbegin):
        root = common_root([item["path"] for item in self._inputs])
        return (
            pbegin
            | "PlanUnits" >> beam.Create(plan_units(self._inputs, self._config.unit_bytes))
            | "SpreadUnits" >> beam.Reshuffle()
            | "ExtractDocuments"
            >> beam.ParDo(_ExtractBooksFn(self._output_dir, root, self._config))
        )


def run(argv: list[str] | None = None) -> int:
    """Run the stage; return the exit code (1 when an input was not read to its end)."""
    flags, options = parse_stage(BooksFlags, argv, "bertkit books", __doc__, DOCUMENTS_STAGE_PATHS)
    config = flags.config()
    inputs = expand_inputs(flags.input)
    prepare_output_dir(flags.output, flags.overwrite, STAGE)
    extract = ExtractBooks(inputs, flags.output, config)
    progress = progress_phases(sum(item["bytes"] for item in inputs))
    return run_documents_pipeline(options, STAGE, extract, inputs, config, flags.output, progress)


def main(argv: list[str] | None = None) -> None:
    stage_main(run, argv, "bertkit books")


if __name__ == "__main__":
    main()
