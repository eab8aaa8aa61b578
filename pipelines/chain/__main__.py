"""`python -m pipelines.chain` = `bertkit chain`."""

from pipelines.chain.cli import main

main()
