"""The one line a benchmark ends with when an extra it needs is not installed (imported
by bench/dev_extra.py and bench/train_extra.py, first in each benchmark): exit 2, never a
traceback from an import.

Importing this module imports nothing outside the standard library: the modules that
pipelines.io.extras itself needs (bertkit's core install: pyarrow, numpy) are probed
(found, not imported) first, so that a machine without them gets the line too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# What importing pipelines.io.extras imports beyond the standard library (pipelines.io's
# package imports the schemas, which import pyarrow).
_CORE_MODULES = ("pyarrow", "numpy")


def _command() -> str:
    """`python -m bench.NAME` as the user typed it (runpy sets argv[0] to the module's file
    before running it)."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.suffix == ".py" and started.parent.name == "bench":
        return f"`python -m bench.{started.stem}`"
    return "this benchmark"


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install: no module there to import
        return False


def core_problem(extra: str) -> str | None:
    """One line naming the core's modules that are not installed and the install; None when
    they all are."""
    absent = [name for name in _CORE_MODULES if not _found(name)]
    if not absent:
        return None
    verb = "is" if len(absent) == 1 else "are"
    return (
        f"{_command()} needs bertkit's install ({', '.join(absent)} {verb} not installed): "
        f"pip install -c constraints.txt -e '.[{extra}]' in the bertkit checkout (on a CUDA "
        "machine, beside its torch, as docs/gpu.md says)"
    )


def require(extra: str) -> None:
    """Exit 2 with one line naming the install command where `extra` is not installed."""
    problem = core_problem(extra)
    if problem is None:
        from pipelines.io import extras  # the core is there: this import cannot fail on it

        problem = extras.extra_problem(_command(), extra)
    if problem:
        print(f"bench: error: {problem}", file=sys.stderr)
        sys.exit(2)
