"""Extract sentence-split documents from book files.

`--format files` (default): one book per file (.txt, .txt.gz, .txt.bz2). Project Gutenberg's
header and licence are stripped, hard-wrapped lines are reflowed into paragraphs, headings,
lists, tables, tables of contents, programmes and directories dropped (counted by rule:
list_items_dropped, …), and paragraphs split into sentences.

`--format lines`: the BookCorpus mirror format, one sentence per line. A blank line ends a
document; a file without blank lines is cut every `--lines_per_document` lines (the mirrors
lost the book boundaries; fixed windows are the honest, deterministic choice).

Both formats read a file's bytes alike: CRLF and CR line ends; UTF-8, a line that is not
UTF-8 read as cp1252 (counted: decoded_with_fallback files, lines_decoded_with_fallback
lines); UTF-16 with a byte-order mark; control characters and stray NUL bytes removed
(control_characters_removed); an empty or binary file rejected (`not_text`). A line over
`--max_line_kb` is no text: it is rejected (`line_too_long`), never held in memory whole,
and the rest of the file is kept. A sentence over 16,384 characters is cut after the last
space of each window, as `bertkit examples` cuts it (sentences_cut), and a paragraph over
1 Mi characters (a book without blank lines) at line boundaries (paragraphs_cut), so memory
is bounded whatever their length.

Writes DIR/documents-*.parquet (Document schema), DIR/_rejects/ and, last, DIR/_manifest.json.
Exits 1 if any input could not be read to its end.

    bertkit books --input 'data/books/*.txt' --output out/books
    python -m pipelines.books --input 'bookcorpus/*.txt' --format lines --output out/bookcorpus

Read on: docs/stages/books.md (flags, what a correct run produces).
Flags not listed below go to Beam's PipelineOptions (e.g. --runner DataflowRunner).
"""

from pipelines.command.startup import lazy_exports

# Imported on first use, so that importing the package (for its config, say) costs nothing
# and `python -m pipelines.books` decides how Beam is imported (pipelines/command/startup.py).
_EXPORTS = {
    "BooksConfig": "config",
    "COUNTERS": "transforms",
    "ExtractBooks": "transforms",
    "FORMATS": "config",
    "MAX_BOOK_BYTES": "reading",
    "STAGE": "cli",
    "book_document": "reading",
    "book_name": "reading",
    "book_sentences": "reading",
    "common_root": "transforms",
    "line_file_documents": "reading",
    "main": "cli",
    "plan_units": "transforms",
    "progress_phases": "cli",
    "read_book_bytes": "reading",
    "run": "cli",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
