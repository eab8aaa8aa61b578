"""The `bertkit` console script's entry, and `python -m bertkit`'s: `bertkit.cli` imported
with Ctrl-C in that import ending the command in one line, as it does once bertkit.cli's own
start (pipelines/command/startup.py `starting`) takes over, not with a traceback from inside
an import. This module imports nothing of ours at its top, so that window is all but closed."""

from __future__ import annotations

import sys

INTERRUPTED_WHILE_STARTING = "bertkit: interrupted (SIGINT) while starting; nothing was done"


def main() -> None:
    try:
        from bertkit.cli import main as run
    except KeyboardInterrupt:
        print(INTERRUPTED_WHILE_STARTING, file=sys.stderr)
        sys.exit(130)  # the shell's status for SIGINT
    run()
