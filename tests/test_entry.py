"""The console script's first import: Ctrl-C while `bertkit.cli` is imported ends the command
with the one line and status a Ctrl-C while starting has (130), not a traceback."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from bertkit.entry import INTERRUPTED_WHILE_STARTING

ROOT = Path(__file__).resolve().parents[1]

# Ctrl-C arriving while bertkit.cli is imported, at the same point every run: a finder that
# raises KeyboardInterrupt, as the signal's default handler does, when that import starts.
CTRL_C_IN_THE_IMPORT = """
import importlib.abc, sys
class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "bertkit.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
from bertkit.entry import main
main()
"""


def test_ctrl_c_in_the_first_import_is_one_line_and_130() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_IN_THE_IMPORT, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (done.returncode, done.stdout) == (130, "")
    assert done.stderr == f"{INTERRUPTED_WHILE_STARTING}\n"


def test_the_console_script_and_python_m_start_there() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"bertkit": "bertkit.entry:main"}
    assert "from bertkit.entry import main" in (ROOT / "bertkit" / "__main__.py").read_text()
    help_text = subprocess.run(
        [sys.executable, "-m", "bertkit", "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0
    assert help_text.stdout.startswith("usage: bertkit COMMAND [flags]\n")
