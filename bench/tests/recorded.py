"""A GPU script's runs, recorded on the CPU: the script runs with its PYTHON replaced by one
that writes down each command line it is given, with inductor's cache variable as it finds
it, and exits 0, answering the scripts' CUDA check (`python -c …`) with a device's name.
bench/tests/test_gpu_check.py and test_gpu_e2e.py read the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
# Left out of the script's environment: the variables it reads (inductor's import sets the
# cache variable in the test process).
_THE_SCRIPTS = ("STAGES", "TRAIN_ARGS", "BENCH_ARGS", CACHE_VARIABLE)


def recorded_runs(
    script: Path, args: list[str], tmp_path: Path, stages: str | None = None, code: int = 0
) -> tuple[list[tuple[list[str], str | None]], str]:
    """Runs `bash script args…` from the repository root (STAGES set where given), checks
    that it exits with `code` and returns each command line it gave python, with
    CACHE_VARIABLE's value there, and its stdout."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    calls = tmp_path / "calls.jsonl"
    recorder = tmp_path / "python"
    recorder.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(calls)!r}, 'a') as f:\n"
        f"    f.write(json.dumps([sys.argv[1:], os.environ.get({CACHE_VARIABLE!r})]) + '\\n')\n"
        "if sys.argv[1] == '-c':\n"
        "    print('Recorded GPU')\n"
    )
    recorder.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in _THE_SCRIPTS}
    env["PYTHON"] = str(recorder)
    if stages is not None:
        env["STAGES"] = stages
    done = subprocess.run(
        ["bash", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == code, done.stderr + done.stdout[-2000:]
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [(argv, cache) for argv, cache in map(json.loads, lines)], done.stdout
