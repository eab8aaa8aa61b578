"""Imported first by each benchmark that needs the dev extra (torch, boto3, pytest and the
loopback servers of tests/support): without it, `python -m bench.NAME`, `--help` included,
ends with one line naming the install command and exit 2, not a traceback from an import.

    bench: error: `python -m bench.loader` needs the dev extra (torch, … are not
    installed): pip install -c constraints.txt -e '.[dev]' in the bertkit checkout

The benchmarks that run on the core install (bench.extract, bench.examples, …) do not
import it.
"""

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


_problem = extras.extra_problem(_command(), "dev")
if _problem:
    print(f"bench: error: {_problem}", file=sys.stderr)
    sys.exit(2)
