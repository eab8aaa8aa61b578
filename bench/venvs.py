"""The other projects bertkit is compared with, run from where the user installed them.

WikiExtractor (bench.extract), datatrove (bench.dedup), TensorFlow for google-research/bert's
script (bench.examples) and TensorFlow with transformers 4.x (bench.tf_checkpoint) must
never be bertkit dependencies, and nothing is downloaded unasked: a benchmark runs each
from a python of the user's environment that has it (its --NAME-python flag), or, only
with --install-into DIR, from a venv DIR/<name> it installs with every version pinned (a
venv whose check already passes is reused as it is; what venv and pip print goes to
DIR/logs/<name>-install.log). With neither, it stops in one line saying how to get one.
Not a command of its own.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn


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


@dataclass(frozen=True)
class Tool:
    """Another project a benchmark compares bertkit with, run from the user's install:
    `flag` names a python of the user's environment that has it; `--install-into DIR`
    makes a venv DIR/`name` holding `packages` (every version pinned) instead."""

    name: str
    flag: str
    what: str
    packages: tuple[str, ...]
    check_code: str


def add_tool_arguments(parser: argparse.ArgumentParser, *tools: Tool) -> None:
    """Each tool's --NAME-python flag and the one --install-into flag."""
    for tool in tools:
        parser.add_argument(
            tool.flag,
            type=Path,
            metavar="PYTHON",
            help=f"a python of your environment that has {tool.what} (`pip install "
            f"{' '.join(tool.packages)}` made it so)",
        )
    parser.add_argument(
        "--install-into",
        type=Path,
        metavar="DIR",
        help="instead: install what a --*-python flag names into a venv of its own under DIR "
        "(bench/.work, say), every version pinned; a venv already there is reused",
    )


def _stop(line: str) -> NoReturn:
    print(line, file=sys.stderr)
    sys.exit(2)


def tool_python(command: str, tool: Tool, given: Path | None, install_into: Path | None) -> str:
    """The interpreter that runs `tool`: `given` once it passes the tool's check, else the
    venv --install-into makes; with neither, exit 2 in one line saying how to get one."""
    if given is not None:
        check = [str(given), "-c", tool.check_code]
        try:
            failed = subprocess.run(check, capture_output=True).returncode != 0
        except OSError:
            failed = True
        if failed:
            _stop(
                f'{command}: error: {tool.flag} {given}: `{given} -c "{tool.check_code}"` '
                f"failed: install {tool.what} there (`pip install {' '.join(tool.packages)}`)"
            )
        return str(given)
    if install_into is not None:
        problem = ensure_venv(install_into.resolve(), tool.name, tool.packages, tool.check_code)
        if problem is not None:
            _stop(f"{command}: error: could not install {tool.what}: {problem}")
        return str(venv_python(install_into.resolve(), tool.name))
    _stop(
        f"{command}: error: it runs {tool.what} from your install: give {tool.flag} PATH, a "
        f"python where `pip install {' '.join(tool.packages)}` was run, or --install-into "
        "bench/.work to install it into a venv there"
    )
