"""`python -m bertkit COMMAND …`: the `bertkit` command without the console script."""

import sys

from bertkit.entry import main

sys.argv[0] = "bertkit"  # usage lines read as the console script's do
main()
