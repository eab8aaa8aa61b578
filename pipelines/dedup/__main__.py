"""`python -m pipelines.dedup` = `bertkit dedup`."""

from pipelines.dedup.cli import main

main()
