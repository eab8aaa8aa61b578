"""`python -m pipelines.books` = `bertkit books`."""

from pipelines.books.cli import main

main()
