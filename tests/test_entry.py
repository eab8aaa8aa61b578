"""The console script's first import: Ctrl-C or SIGTERM while `bertkit.cli` is imported ends
the command with the one line and status a signal while starting has (130, 143), not a
traceback or a silent kill."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bertkit.entry import stopped_while_starting
from tests.support.import_signal import VARIABLE, signal_at_import

ROOT = Path(__file__).resolve().parents[1]

# The signal arriving while bertkit.cli is imported, at the same point every run.
SIGNAL_IN_THE_IMPORT = signal_at_import("bertkit.cli", "from bertkit.entry import main\nmain()")


@pytest.mark.parametrize(("name", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_in_the_first_import_is_one_line_and_its_status(name: str, status: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_IN_THE_IMPORT, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, VARIABLE: name},
    )
    assert (done.returncode, done.stdout) == (status, "")
    assert done.stderr == f"{stopped_while_starting(name)}\n"


def test_the_console_script_and_python_m_start_there() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"bertkit": "bertkit.entry:main"}
    assert "from bertkit.entry import main" in (ROOT / "bertkit" / "__main__.py").read_text()
    help_text = subprocess.run(
        [sys.executable, "-m", "bertkit", "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0
    assert help_text.stdout.startswith("usage: bertkit COMMAND [flags]\n")
