"""`python -m pipelines.inspect` = `bertkit inspect`."""

from pipelines.inspect.cli import main

main()
