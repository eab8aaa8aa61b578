"""Run bertkit on the embedded real sample, end to end, and say where everything is.

Today the chain is: the enwiki sample dump → `bertkit wikipedia`, the four public-domain
books → `bertkit books`, both to Parquet documents. A correct run reports 97 Wikipedia
documents (of 206 pages: 100 redirects, 8 disambiguation pages, 1 talk-namespace page and
the list-only "List of anthropologists" are dropped) and 4 books.

    bertkit demo [--output out/demo]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines import books, wikipedia
from pipelines.beam_runner import PROJECT_ROOT

SAMPLE_DIR = PROJECT_ROOT / "data"
WIKIPEDIA_SAMPLE = SAMPLE_DIR / "wikipedia" / "*.xml.bz2"
BOOKS_SAMPLE = SAMPLE_DIR / "books" / "*.txt"


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", default="out/demo", help="where to write (replaced)")
    args = parser.parse_args(argv)
    output = Path(args.output)
    wiki_dir, books_dir = output / "documents" / "wikipedia", output / "documents" / "books"

    print(f"1/2 Wikipedia: {WIKIPEDIA_SAMPLE} → {wiki_dir}")
    code = wikipedia.run(
        ["--input", str(WIKIPEDIA_SAMPLE), "--output", str(wiki_dir), "--overwrite"]
    )
    print(f"2/2 Books: {BOOKS_SAMPLE} → {books_dir}")
    code |= books.run(["--input", str(BOOKS_SAMPLE), "--output", str(books_dir), "--overwrite"])

    print(
        "\nDone. Look inside:\n"
        f"  cat {wiki_dir}/_manifest.json\n"
        f"  python -c \"import pyarrow.dataset as ds; print(ds.dataset('{wiki_dir}').schema)\"\n"
        f'  python -c "import pyarrow.dataset as ds; '
        f"print(ds.dataset('{books_dir}').to_table(columns=['id', 'title']))\""
    )
    return code


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
