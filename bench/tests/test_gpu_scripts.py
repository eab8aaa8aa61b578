"""What bench/gpu_check.sh and bench/gpu_e2e.sh do before and after their stages, checked on
the CPU in seconds: no CUDA device stops them at once in one line, an unknown STAGES name
is refused naming the stages, a stage that fails or is skipped makes the exit code 1 with a
line naming it, and the machine's lines name a missing module without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {  # each script and the arguments after OUT_DIR
    "gpu_check.sh": [],
    "gpu_e2e.sh": ["s128", "s512"],
}
_THE_SCRIPTS = ("STAGES", "TRAIN_ARGS", "BENCH_ARGS", "PYTHON", "TORCHINDUCTOR_CACHE_DIR")


def run(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """`bash bench/SCRIPT TMP/out ARGS…` from the repository root with `env` added."""
    environment = {k: v for k, v in os.environ.items() if k not in _THE_SCRIPTS}
    environment.update(env)
    argv = ["bash", ROOT / "bench" / script, str(tmp_path / "out"), *SCRIPTS[script]]
    return subprocess.run(argv, cwd=ROOT, env=environment, capture_output=True, text=True)


def fake_python(tmp_path: Path, stage_exit: int) -> Path:
    """A python that answers the CUDA check with a device's name and exits `stage_exit`
    for every other command (a stage's)."""
    path = tmp_path / "python"
    path.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "if sys.argv[1] == '-c':\n    print('Fake GPU')\n    sys.exit(0)\n"
        f"sys.exit({stage_exit})\n"
    )
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_cuda_device_stops_before_any_work_in_one_line(script, tmp_path):
    # The tests' torch is the CPU build: it sees no CUDA device.
    done = run(script, tmp_path, PYTHON=sys.executable)
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr.splitlines() == [
        f"bench/{script}: error: no CUDA device for {sys.executable}: torch "
        f"{torch_version()} (CUDA None) sees no CUDA device; nothing measured (PYTHON names "
        "the interpreter with a CUDA torch)"
    ]
    assert not (tmp_path / "out").exists()


def torch_version() -> str:
    import torch

    return torch.__version__


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_interpreter_without_torch_or_none_at_all_is_one_line(script, tmp_path):
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 0\n")
    silent.chmod(0o755)
    done = run(script, tmp_path, PYTHON=str(silent))
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == (
        f"bench/{script}: error: no CUDA device for {silent}: it printed nothing (exit 0); "
        "nothing measured (PYTHON names the interpreter with a CUDA torch)\n"
    )
    done = run(script, tmp_path, PYTHON=str(tmp_path / "absent"))
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1
    assert f"no CUDA device for {tmp_path / 'absent'}: " in done.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_without_python_set_the_checkouts_venv_is_taken_where_there_is_one(script, tmp_path):
    venv = ROOT / ".venv" / "bin" / "python"
    done = run(script, tmp_path)
    assert done.returncode == 3
    taken = str(venv) if os.access(venv, os.X_OK) else "python3"
    assert f"no CUDA device for {taken}: " in done.stderr


@pytest.mark.parametrize(
    ("script", "known"),
    [
        (
            "gpu_check.sh",
            "base large dropout0 fp16 kernels ffn ffn-large add-norm unpad512 pad512 "
            "pad512-drop fp8 fp8-rowwise fp8-auto autotune autotune-warm",
        ),
        (
            "gpu_e2e.sh",
            "e2e128 bench128 e2e512 e2e512-ad0 e2e512-unpad e2e512-unpad-2018 e2e512-nodrop",
        ),
    ],
)
def test_an_unknown_stage_name_is_refused_naming_the_stages(script, known, tmp_path):
    first = known.split()[0]
    done = run(script, tmp_path, STAGES=f"{first} bsae e2e", PYTHON="/nonexistent")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"bench/{script}: error: unknown stage in STAGES: bsae e2e (the stages: {known})\n"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("script", "stage"), [("gpu_check.sh", "fp16"), ("gpu_e2e.sh", "bench128")]
)
def test_a_failed_stage_makes_exit_1_and_the_last_line_names_it(script, stage, tmp_path):
    done = run(script, tmp_path, STAGES=stage, PYTHON=str(fake_python(tmp_path, 1)))
    assert done.returncode == 1, done.stderr
    assert f"== {stage}: exit 1 after " in done.stdout
    assert done.stdout.endswith(f"== NOT ALL MEASURED: failed: {stage}; skipped: none\n")
    done = run(script, tmp_path, STAGES=stage, PYTHON=str(fake_python(tmp_path, 0)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("== all measured\n")
    assert done.stdout.splitlines()[0] == f"== CUDA device: Fake GPU ({tmp_path / 'python'})"


@pytest.mark.parametrize(("script", "stage"), [("gpu_check.sh", "fp16"), ("gpu_e2e.sh", "e2e128")])
def test_a_stage_skipped_for_the_budget_makes_exit_1(script, stage, tmp_path):
    args = {"gpu_check.sh": [], "gpu_e2e.sh": ["s128", "s512"]}[script]
    environment = {k: v for k, v in os.environ.items() if k not in _THE_SCRIPTS}
    environment.update(STAGES=stage, PYTHON=str(fake_python(tmp_path, 0)))
    argv = ["bash", ROOT / "bench" / script, str(tmp_path / "out"), *args, "10"]
    done = subprocess.run(argv, cwd=ROOT, env=environment, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert f"== {stage}: SKIPPED, " in done.stdout
    assert done.stdout.endswith(f"== NOT ALL MEASURED: failed: none; skipped: {stage}\n")


def test_the_machine_lines_name_a_missing_module_without_a_traceback(tmp_path):
    shown = subprocess.run(
        ["bash", "-c", "source bench/gpu_stages.sh && machine shlex no_such_module_here"],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
    )
    lines = shown.stdout.splitlines()
    assert lines[-3:] == [
        f"torch {torch_version()} cuda None",
        "shlex (no version)",
        "no_such_module_here: not installed",
    ]
    assert "Traceback" not in shown.stderr
