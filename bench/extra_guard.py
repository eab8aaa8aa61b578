"""The one line a benchmark ends with when an extra it needs is not installed (imported
by bench/dev_extra.py and bench/train_extra.py, first in each benchmark): exit 2, never a
traceback from an import."""

from __future__ import annotations

import sys
from pathlib import Path

from pipelines.io import extras


def _command() -> str:
    """`python -m bench.NAME` as the user typed it (runpy sets argv[0] to the module's file
    before running it)."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.suffix == ".py" and started.parent.name == "bench":
        return f"`python -m bench.{started.stem}`"
    return "this benchmark"


def require(extra: str) -> None:
    """Exit 2 with one line naming the install command where `extra` is not installed."""
    problem = extras.extra_problem(_command(), extra)
    if problem:
        print(f"bench: error: {problem}", file=sys.stderr)
        sys.exit(2)
