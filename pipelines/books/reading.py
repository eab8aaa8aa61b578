"""One book file → its Documents, or the reasons it has none (Beam-free).

`--format files`: the whole book, one Document (`book_document`); `--format lines`: one
sentence a line, streamed into Documents (`line_file_documents`).
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable

from pipelines.beam import files
from pipelines.beam.documents import UnitTally
from pipelines.beam.inputs import name_under
from pipelines.bert.sentence_cuts import cut_sentence
from pipelines.books.config import BooksConfig
from pipelines.io.compressed import InputReadError, decompressed_chunks
from pipelines.io.storage import Reader
from pipelines.text.bookdecode import (
    BookTextError,
    DecodedBook,
    DecodeStats,
    LongTextLine,
    book_lines,
    decode_book,
)
from pipelines.text.booktext import cut_long_paragraphs, iter_book_paragraphs, line_documents
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
    decoded = _decoded_book(path, doc_id, config, tally, reader)
    if decoded is None:
        return None
    text = decoded.text
    del decoded  # the book is held as few times as its steps need (text and body)
    title = book_title(text, fallback=posixpath.basename(name))
    body, had_boilerplate = strip_gutenberg(text)
    del text
    if had_boilerplate:
        tally.count("gutenberg_boilerplate_removed")
    body, paragraphs_cut = cut_long_paragraphs(body)
    if paragraphs_cut:
        tally.count("paragraphs_cut", paragraphs_cut)
    not_prose: Counter[str] = Counter()  # what pipelines/text/nonprose.py dropped, by rule
    paragraphs = iter_book_paragraphs(body, config.min_paragraph_words, not_prose)
    sentences = book_sentences(paragraphs, tally)
    for rule, dropped in sorted(not_prose.items()):
        tally.count(f"{rule}_dropped", dropped)
    if not sentences:
        tally.drop("no_running_text")
        return None
    return Document(id=doc_id, source="books", title=title, sentences=tuple(sentences))


def _decoded_book(
    path: str, doc_id: str, config: BooksConfig, tally: UnitTally, reader: Reader
) -> DecodedBook | None:
    """The book file decoded, or None after recording why not (its bytes go on return)."""
    try:
        data = read_book_bytes(path, reader)
    except _READ_ERRORS as err:
        _fail_unreadable(tally, path, err)
        return None
    tally.count("input_bytes", len(data))
    try:
        decoded = decode_book(data, config.max_line_bytes, path)
    except BookTextError as err:
        tally.reject(Reject(doc_id, path, err.position, "not_text", str(err)))
        return None
    except InputReadError as err:  # damaged UTF-16: the book is not read to its end
        _fail_unreadable(tally, path, err)
        return None
    for line in decoded.long_lines:
        error = line.error(config.max_line_bytes)
        tally.reject(Reject(doc_id, path, f"line {line.number}", "line_too_long", error))
    _count_decoding(decoded.stats, tally)
    return decoded


def _count_decoding(stats: DecodeStats, tally: UnitTally) -> None:
    """What reading a file's bytes as text took (pipelines/text/bookdecode.py), as counts:
    `decoded_with_fallback` files and `lines_decoded_with_fallback` lines were not all UTF-8
    (read as cp1252), `control_characters_removed`, `decoded_from_utf16` files."""
    if stats.fallback_lines:
        tally.count("decoded_with_fallback")
        tally.count("lines_decoded_with_fallback", stats.fallback_lines)
    if stats.controls_removed:
        tally.count("control_characters_removed", stats.controls_removed)
    if stats.encoding != "utf-8":
        tally.count("decoded_from_utf16")


def book_sentences(paragraphs: Iterable[str], tally: UnitTally) -> list[str]:
    """The paragraphs' sentences, one over the examples stage's bound cut (`cut_sentences`)."""
    return cut_sentences(
        (sentence for paragraph in paragraphs for sentence in split_sentences(paragraph)), tally
    )


def cut_sentences(sentences: Iterable[str], tally: UnitTally) -> list[str]:
    """The sentences; one over the examples stage's bound is cut as it cuts them.

    `bertkit examples` would cut it anyway (pipelines/bert/sentence_cuts.py: after the last
    space of each 16,384-character window); cut here, no sentence of a Document is longer.
    The pieces are stripped, as every sentence is (so `" ".join` gives the sentence back),
    and each sentence cut counts once (sentences_cut).
    """
    kept: list[str] = []
    for sentence in sentences:
        pieces = cut_sentence(sentence)
        if len(pieces) > 1:
            tally.count("sentences_cut")
            pieces = [piece.strip() for piece in pieces]
        kept += pieces
    return kept


def line_file_documents(
    path: str, name: str, config: BooksConfig, tally: UnitTally, reader: Reader = files.READER
):
    """Stream one BookCorpus-style file (one sentence per line) into Documents.

    Its lines are read as a book's are (`book_lines`: line ends, byte-order marks, UTF-16,
    cp1252 lines, control characters); a line over the line limit is rejected and ends its
    document, a sentence over the examples stage's bound is cut (`cut_sentences`). Where
    the file cannot be read to its end (damaged compression or UTF-16), every whole line
    before the fault is kept, the document it was in ended there, and the input failed.
    """
    tally.count("input_files")
    stats = DecodeStats()
    input_bytes = 0

    def counted(chunks):
        nonlocal input_bytes
        for chunk in chunks:
            input_bytes += len(chunk)
            yield chunk

    failed: list[BaseException] = []  # the fault that ended the file, if one did

    def text_lines():
        chunks = counted(decompressed_chunks(reader, path))
        try:
            for line in book_lines(chunks, config.max_line_bytes, stats, path):
                if isinstance(line, LongTextLine):
                    error = line.error(config.max_line_bytes)
                    tally.reject(Reject(None, path, f"line {line.number}", "line_too_long", error))
                    yield ""  # it ends the document: the lines either side were not adjacent
                else:
                    yield line
        except _READ_ERRORS as err:  # caught here, so line_documents gives its document
            failed.append(err)

    try:
        for number, sentences in enumerate(line_documents(text_lines(), config.lines_per_document)):
            yield Document(
                id=f"bookcorpus/{name}/{number}",
                source="bookcorpus",
                title=f"{posixpath.basename(name)} #{number}",
                sentences=tuple(cut_sentences(sentences, tally)),
            )
    except BookTextError as err:
        tally.reject(Reject(None, path, err.position, "not_text", str(err)))
    for err in failed:
        _fail_unreadable(tally, path, err)
    tally.count("input_bytes", input_bytes)
    _count_decoding(stats, tally)
