"""Imported first by each benchmark that needs the dev extra (torch, boto3, pytest and the
loopback servers of tests/support): without it, `python -m bench.NAME`, `--help` included,
ends with one line naming the install command and exit 2, not a traceback from an import.

    bench: error: `python -m bench.loader` needs the dev extra (torch, … are not
    installed): pip install -c constraints.txt -e '.[dev]' in the bertkit checkout

The benchmarks that run on the core install (bench.extract, bench.examples, …) do not
import it; bench.train_step, which needs only the trainer, imports bench/train_extra.py.
"""

from __future__ import annotations

from bench.extra_guard import require

require("dev")
