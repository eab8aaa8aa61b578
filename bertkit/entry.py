"""The `bertkit` console script's entry, and `python -m bertkit`'s: `bertkit.cli` imported
with Ctrl-C or SIGTERM in that import ending the command in one line, as they do once
bertkit.cli's own start (pipelines/command/startup.py `starting`) takes over, not with a
traceback from inside an import. This module imports nothing of ours at its top, so that
window is all but closed."""

from __future__ import annotations

import signal
import sys


class _Terminated(Exception):
    """SIGTERM while bertkit.cli is imported."""


def _terminated(number: int, frame: object) -> None:
    raise _Terminated


def stopped_while_starting(name: str) -> str:
    return f"bertkit: interrupted ({name}) while starting; nothing was done"


def main() -> None:
    # Only where SIGTERM has its default action (an ignored one stays ignored).
    ours = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if ours:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        from bertkit.cli import main as run
    except KeyboardInterrupt:
        print(stopped_while_starting("SIGINT"), file=sys.stderr)
        sys.exit(130)  # the shell's status for each signal
    except _Terminated:
        print(stopped_while_starting("SIGTERM"), file=sys.stderr)
        sys.exit(143)
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    run()
