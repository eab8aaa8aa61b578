"""`python -m pipelines.examples` = `bertkit examples`."""

from pipelines.examples.cli import main

main()
