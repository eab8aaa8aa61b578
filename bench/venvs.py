"""Throwaway virtual environments for the tools bertkit is compared with.

WikiExtractor (bench.extract) and TensorFlow for google-research/bert's script
(bench.examples) must never be bertkit dependencies, so a benchmark installs its tool into a
venv of its own under the work directory, WORKDIR/<name>, the first time it needs it: a
venv whose check already passes is reused as it is. What venv and pip print goes to
WORKDIR/logs/<name>-install.log. Not a command of its own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def venv_python(workdir: Path, name: str) -> Path:
    return workdir / name / "bin" / "python"


def ensure_venv(
    workdir: Path,
    name: str,
    packages: Sequence[str],
    check_code: str,
    what: str = "never a bertkit dependency",
) -> str | None:
    """Make WORKDIR/NAME a venv holding ``packages`` unless ``python -c CHECK_CODE`` already
    succeeds in it; then check again. None when the venv is ready, else why not.

    The venv is made with python3.11 where it is on PATH (the project's Python version, so
    the tools get the same interpreter as bertkit), else with this interpreter.
    """
    python = venv_python(workdir, name)
    check = [str(python), "-c", check_code]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return None
    venv = python.parent.parent
    print(f"installing {' '.join(packages)} into {venv} ({what})", flush=True)
    base_python = shutil.which("python3.11") or sys.executable
    log = workdir / "logs" / f"{name}-install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [base_python, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", *packages],
        check,
    ]
    with log.open("wb") as out:
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                return f"`{' '.join(step[:4])} …` failed (log: {log})"
    return None
