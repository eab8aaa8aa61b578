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

from pipelines.books.cli import STAGE, main, progress_phases, run
from pipelines.books.config import FORMATS, BooksConfig
from pipelines.books.reading import (
    MAX_BOOK_BYTES,
    book_document,
    book_name,
    book_sentences,
    common_root,
    line_file_documents,
    read_book_bytes,
)
from pipelines.books.transforms import COUNTERS, ExtractBooks, plan_units

__all__ = [
    "COUNTERS",
    "FORMATS",
    "MAX_BOOK_BYTES",
    "STAGE",
    "BooksConfig",
    "ExtractBooks",
    "book_document",
    "book_name",
    "book_sentences",
    "common_root",
    "line_file_documents",
    "main",
    "plan_units",
    "progress_phases",
    "read_book_bytes",
    "run",
]
