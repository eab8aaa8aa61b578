"""One book file → its Documents, or the reasons it has none (Beam-free).

`--format files`: the whole book, one Document (`book_document`); `--format lines`: one
sentence a line, streamed into Documents (`line_file_documents`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from pipelines.beam import files
from pipelines.beam.documents import UnitTally
from pipelines.beam.inputs import name_under
from pipelines.bert.sentence_cuts import cut_sentence
from pipelines.books.config import BooksConfig
from pipelines.io.compressed import InputReadError, LongLine, decompressed_chunks, lines
from pipelines.io.storage import Reader
from pipelines.text.booktext import (
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

_COMPRESSED_SUFFIXES = (".gz", ".bz2")
# A book far beyond any real one (War and Peace is 3.2 MB) is a wrong input, not a book.
MAX_BOOK_BYTES = 64 << 20


def book_name(path: str, root: str) -> str:
    """Stable id part of a book file: its path under the inputs' common root, no suffixes.

    '/data/gutenberg/alice29.txt.gz' under '/data' → 'gutenberg/alice29'.
    """
    name = name_under(path, root)
    for suffix in _COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return name.removesuffix(".txt")


def read_book_bytes(path: str, reader: Reader = files.READER) -> bytes:
    """The file's bytes, decompressed by suffix; InputReadError if damaged or too large."""
    chunks, size = [], 0
    for chunk in decompressed_chunks(reader, path):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BOOK_BYTES:
            raise InputReadError(
                path,
                f"byte {size}",
                f"over {MAX_BOOK_BYTES >> 20} MB: not one book "
                "(use --format lines for corpus files)",
                "too_large",
            )
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
