"""`python -m pipelines.wikipedia` = `bertkit wikipedia`."""

from pipelines.wikipedia.cli import main

main()
