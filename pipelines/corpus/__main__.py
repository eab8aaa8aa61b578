"""`python -m pipelines.corpus` = `bertkit corpus`."""

from pipelines.corpus.cli import main

main()
