"""`python -m bertkit COMMAND …`: the `bertkit` command without the console script."""

from bertkit.cli import main

main()
