"""`python -m pipelines.vocab` = `bertkit vocab`."""

from pipelines.vocab.cli import main

main()
