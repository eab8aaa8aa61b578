"""bench/extra_guard.py on a machine without bertkit's core install (no pyarrow, as a bare
GPU machine may be): `python -m bench.NAME --help` is one line naming the install, exit 2,
not a traceback from pipelines.io's import of the schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.without_modules import ROOT, environment


@pytest.mark.parametrize(("benchmark", "extra"), [("train_step", "train"), ("loader", "dev")])
def test_a_benchmark_without_pyarrow_is_one_line(tmp_path: Path, benchmark: str, extra: str):
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{benchmark}", "--help"],
        cwd=ROOT,
        env=environment(tmp_path, ("pyarrow",)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"bench: error: `python -m bench.{benchmark}` needs bertkit's install (pyarrow is not "
        f"installed): pip install -c constraints.txt -e '.[{extra}]' in the bertkit checkout "
        "(on a CUDA machine, beside its torch, as docs/gpu.md says)\n"
    )


def test_importing_the_guard_imports_nothing_outside_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); import bench.extra_guard; "
        "print(sorted(m for m in set(sys.modules) - before if not m.startswith('bench')))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert all(name.split(".")[0] in sys.stdlib_module_names for name in eval(done.stdout)), (
        done.stdout
    )
