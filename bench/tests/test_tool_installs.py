"""The benchmarks that compare bertkit with another project run it from the user's install
(--wikiextractor-python, --bertkit-core-python, --datatrove-python, --tf-python) and install
it only when asked (--install-into DIR, every version pinned): with neither, or with a python
that lacks it, each stops before any work in one line, exit 2. Nothing is downloaded here
(PIP_NO_INDEX=1 for the one install tried)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import venvs
from bench.dedup import DATATROVE
from bench.examples_tools import GOOGLE_TF
from bench.extract_tools import BERTKIT_CORE, WIKIEXTRACTOR
from bench.tf_checkpoint import TF_TOOL

ROOT = Path(__file__).resolve().parents[2]
CASES = [  # the command, its arguments, the tool it needs
    ("extract", ["--quick", "--tools", "wikiextractor"], WIKIEXTRACTOR),
    ("extract", ["--quick", "--tools", "bertkit,floor"], BERTKIT_CORE),
    ("dedup", [], DATATROVE),
    ("tf_checkpoint", [], TF_TOOL),
]


def bench(name: str, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"bench.{name}", *argv],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("name", "argv", "tool"), CASES)
def test_without_the_users_install_or_install_into_it_stops_in_one_line(name, argv, tool):
    done = bench(name, *argv)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"python -m bench.{name}: error: it runs {tool.what} from your install: give "
        f"{tool.flag} PATH, a python where `pip install {' '.join(tool.packages)}` was run, "
        "or --install-into bench/.work to install it into a venv there\n"
    )


@pytest.mark.parametrize(("name", "argv", "tool"), CASES)
def test_a_python_without_the_tool_is_refused_in_one_line(name, argv, tool, tmp_path):
    absent = tmp_path / "absent-python"
    done = bench(name, *argv, tool.flag, str(absent))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"python -m bench.{name}: error: {tool.flag} {absent}: ")
    assert len(done.stderr.splitlines()) == 1


def test_every_package_installed_into_a_venv_is_pinned():
    for tool in (WIKIEXTRACTOR, DATATROVE, GOOGLE_TF, TF_TOOL):
        packages = [p for p in tool.packages if not p.startswith(("-", "https://"))]
        assert packages and all(re.fullmatch(r"[\w.-]+==[\w.+]+", p) for p in packages), tool
    # torch from PyTorch's CPU index: PyPI's Linux wheel is the CUDA build
    assert "torch==2.13.0+cpu" in TF_TOOL.packages
    assert "https://download.pytorch.org/whl/cpu" in TF_TOOL.packages
    assert BERTKIT_CORE.packages[:2] == ("-c", str(ROOT / "constraints.txt"))


def test_install_into_tries_the_pinned_install_and_says_where_its_log_is(tmp_path):
    done = bench(
        "extract",
        "--quick",
        "--tools",
        "wikiextractor",
        "--install-into",
        str(tmp_path),
        PIP_NO_INDEX="1",
    )
    assert done.returncode == 2
    log = tmp_path / "logs" / "wikiextractor-venv-install.log"
    assert done.stderr == (
        "python -m bench.extract: error: could not install WikiExtractor 3.1.0: "
        f"`{tmp_path}/wikiextractor-venv/bin/python -m pip install …` failed (log: {log})\n"
    )
    assert "wikiextractor==3.1.0" in log.read_text()


def test_a_python_that_has_the_tool_is_used_as_it_is(tmp_path):
    tool = venvs.Tool("t", "--t-python", "a tool", ("json==0",), "import json")
    assert venvs.tool_python("x", tool, Path(sys.executable), None) == sys.executable
    assert not (tmp_path / "t").exists()
