"""`python -m trainer.train`'s start (what torchrun runs): Ctrl-C or SIGTERM while its modules
load ends it with the one line and status `bertkit train` has there (130, 143), not
KeyboardInterrupt's traceback or a silent kill by SIGTERM's default action; and without a
signal, the module runs as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertkit.entry import stopped_while_starting
from tests.support.import_signal import VARIABLE, signal_at_import

ROOT = Path(__file__).resolve().parents[1]

# Python imports sitecustomize before it runs `-m`'s module, so the real `python -m
# trainer.train` gets the signal at the same point every run: a finder sends it to the
# process itself when torch's import starts (trainer/train.py's first heavy import).
SIGNAL_IN_THE_IMPORT = signal_at_import("torch")


def _python_m_trainer(tmp_path: Path, signal_name: str | None, *flags: str):
    (tmp_path / "sitecustomize.py").write_text(SIGNAL_IN_THE_IMPORT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop(VARIABLE, None)
    if signal_name:
        env[VARIABLE] = signal_name
    return subprocess.run(
        [sys.executable, "-m", "trainer.train", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.parametrize(("name", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_torch_is_imported_is_one_line_and_its_status(
    tmp_path: Path, name: str, status: int
) -> None:
    flags = ("--shards", str(tmp_path / "shards"), "--output", str(tmp_path / "run"))
    done = _python_m_trainer(tmp_path, name, *flags)
    assert (done.returncode, done.stdout) == (status, "")
    assert done.stderr == f"{stopped_while_starting(name)}\n"
    assert not (tmp_path / "run").exists()  # nothing was done


def test_without_a_signal_the_module_runs_as_before(tmp_path: Path) -> None:
    """The same finder, no signal: the command's own refusal (exit 2), once, and its help."""
    flags = ("--shards", str(tmp_path / "shards"), "--output", str(tmp_path / "run"))
    done = _python_m_trainer(tmp_path, None, *flags)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"bertkit train: error: {tmp_path / 'shards'}: no such file")
    shown = _python_m_trainer(tmp_path, None, "--help")
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout.startswith("usage: bertkit train [-h] --shards SHARDS")
