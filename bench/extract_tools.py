"""bench.extract's tools: how each one is installed and the command each run measures.

bertkit runs from its core install in an environment of its own (--bertkit-core-python, or
--install-into DIR: DIR/bertkit-venv, editable, so the checkout's code as it is) and from
the project's development venv (bertkit-dev); WikiExtractor from the user's install
(--wikiextractor-python, or --install-into: bench.venvs); the floors decompress the dump and
nothing else. The
module docstring of bench.extract says what each tool stands for. Not a command of its own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bench import venvs
from bench.measure import REPO_ROOT, repo_python

WIKIEXTRACTOR_VERSION = "3.1.0"
WIKIEXTRACTOR_VENV = "wikiextractor-venv"
TOOLS = ("bertkit", "bertkit-dev", "wikiextractor", "floor", "reader")
OPT_IN_TOOLS = ("bertkit-python-bz2",)
BERTKIT_VENV = "bertkit-venv"
# Whether the venv holds bertkit's core install, and only that (no cloud extras).
BERTKIT_CHECK = (
    "import importlib.util as u, pipelines.wikipedia.cli; "
    "assert u.find_spec('torch') is None and u.find_spec('boto3') is None; "
    "import google; assert u.find_spec('google.cloud') is None"
)
EXTRACTORS = ("bertkit", "wikiextractor")

# Run as `python -c FLOOR_CODE DUMP`: decompress in 1 MiB chunks and print the XML size.
FLOOR_CODE = """
import bz2, sys
size = 0
with bz2.open(sys.argv[1], "rb") as dump:
    while chunk := dump.read(1 << 20):
        size += len(chunk)
print(size)
"""
# Run as `python -c READER_CODE DUMP` from the repository root: bertkit's reader, the same
# way; it prints the CPU-seconds of the decompression alone (its imports take ~0.3: pyarrow
# comes with pipelines.io), then the XML size.
READER_CODE = """
import sys, time
from pipelines.io.compressed import decompressed_chunks
from pipelines.io.storage import READER
start = time.process_time()
size = sum(len(chunk) for chunk in decompressed_chunks(READER, sys.argv[1]))
print(f"{time.process_time() - start:.3f} {size}")
"""
# The floors decompress only: context for the headline size, not extractors.
FLOORS = ("floor", "reader")
# Run as `python -c PYTHON_BZ2_STAGE_CODE --input DUMP --output DIR` from the repository root:
# the stage as `python -m pipelines.wikipedia` runs it, its fast bz2 decoder refused, so that
# every .bz2 is read by Python's (the reader's fallback). Imported with the collector paused,
# as the stage imports its modules.
PYTHON_BZ2_STAGE_CODE = """
import gc, runpy
gc.disable()
import pipelines.io.compressed as compressed
gc.enable()
def refused(*args):
    raise compressed.Unverified("bench.extract's bertkit-python-bz2")
    yield
compressed.decompress_span = refused
runpy.run_module("pipelines.wikipedia", run_name="__main__", alter_sys=True)
"""


# --------------------------------------------------------------------------------------
# The tools


WIKIEXTRACTOR = venvs.Tool(
    name=WIKIEXTRACTOR_VENV,
    flag="--wikiextractor-python",
    what=f"WikiExtractor {WIKIEXTRACTOR_VERSION}",
    packages=(f"wikiextractor=={WIKIEXTRACTOR_VERSION}",),
    check_code="import importlib.metadata as m; "
    f"assert m.version('wikiextractor') == {WIKIEXTRACTOR_VERSION!r}",
)
BERTKIT_CORE = venvs.Tool(
    name=BERTKIT_VENV,
    flag="--bertkit-core-python",
    what="bertkit's core install (no extras: no torch, no cloud clients)",
    packages=("-c", str(REPO_ROOT / "constraints.txt"), "-e", str(REPO_ROOT)),
    check_code=BERTKIT_CHECK,
)


def bertkit_python(tool: str, settings: RunSettings) -> str:
    """The interpreter a bertkit tool runs with: the core install's, or the dev venv's."""
    if tool == "bertkit-dev":
        return repo_python()
    return settings.bertkit_core_python


@dataclass(frozen=True)
class RunSettings:
    """What every run of every tool shares."""

    workdir: Path
    timeout_s: float
    bertkit_module: str = "pipelines.wikipedia"
    bertkit_args: tuple[str, ...] = ()
    # The pythons of the tools that need one (bench.venvs.tool_python): "" where not run.
    wikiextractor_python: str = ""
    bertkit_core_python: str = ""


@dataclass(frozen=True)
class ToolCommand:
    command: list[str]
    cwd: Path


def tool_command(tool: str, dump: Path, output: Path, settings: RunSettings) -> ToolCommand:
    if tool in ("bertkit", "bertkit-dev"):
        return ToolCommand(
            [
                bertkit_python(tool, settings),
                "-m",
                settings.bertkit_module,
                "--input",
                str(dump),
                "--output",
                str(output),
                *settings.bertkit_args,
            ],
            REPO_ROOT,
        )
    if tool == "bertkit-python-bz2":
        return ToolCommand(
            [
                bertkit_python(tool, settings),
                "-c",
                PYTHON_BZ2_STAGE_CODE,
                "--input",
                str(dump),
                "--output",
                str(output),
                *settings.bertkit_args,
            ],
            REPO_ROOT,
        )
    if tool == "wikiextractor":
        # -q: progress logging on stderr is not part of the work being compared.
        return ToolCommand(
            [
                settings.wikiextractor_python,
                "-m",
                "wikiextractor.WikiExtractor",
                str(dump),
                "--processes",
                "1",
                "-o",
                str(output),
                "-q",
            ],
            settings.workdir,
        )
    if tool == "floor":
        return ToolCommand([sys.executable, "-c", FLOOR_CODE, str(dump)], settings.workdir)
    if tool == "reader":
        return ToolCommand([repo_python(), "-c", READER_CODE, str(dump)], REPO_ROOT)
    raise ValueError(f"unknown tool {tool!r}")
