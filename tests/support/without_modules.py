"""Run a command as if some installed packages were not: the test venv has every extra, and a
user's install may lack any of them.

`environment(tmp_path, modules)` writes a `sitecustomize.py` into `tmp_path` and returns an
environment whose PYTHONPATH starts there. Python imports sitecustomize at start-up (the
venv has none of its own), and ours puts a finder first on `sys.meta_path` that answers
each named module, and every module under it, as a missing package answers: `import boto3`
raises ModuleNotFoundError, and `importlib.util.find_spec("boto3")` raises it too, as it
does for `google.cloud.storage` where `google` is not installed. Every module of the
project and every other package imports as usual.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_SITECUSTOMIZE = '''
import sys

BLOCKED = {blocked!r}


class _Missing:
    """The named modules as not installed (tests/support/without_modules.py)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Missing)
'''

ROOT = Path(__file__).resolve().parents[2]


def environment(directory: Path, modules: Sequence[str]) -> dict[str, str]:
    """The environment of a process that runs without `modules` (and the project on its
    path, from any working directory)."""
    (directory / "sitecustomize.py").write_text(
        _SITECUSTOMIZE.format(blocked=tuple(modules)), encoding="utf-8"
    )
    path = [str(directory), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
