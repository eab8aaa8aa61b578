"""The GPU user's install (docs/training.md, "Install on a GPU machine"): bertkit's `train`
extra installed beside a CUDA torch the user already has keeps that torch, and the run's
set-up line names the device it took.

pip is asked what it would do (`--dry-run --report`), offline (`--no-index`, the project built
without an isolated build environment), in this venv with a stand-in CUDA torch in front of
the installed one: a `torch-2.6.0+cu124` distribution's metadata on PYTHONPATH, which pip
takes as the installed torch, as it takes a real one. No GPU and no download needed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.setup import device_shown

ROOT = Path(__file__).resolve().parent.parent
CUDA_TORCH = "2.6.0+cu124"  # another version than constraints.txt's pin, as most CUDA users have


@pytest.fixture(scope="module")
def cuda_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding only a CUDA torch's installed metadata, for PYTHONPATH."""
    site = tmp_path_factory.mktemp("cuda-torch")
    info = site / f"torch-{CUDA_TORCH}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {CUDA_TORCH}\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")
    return site


def would_install(site: Path, *pip_args: str) -> tuple[int, dict[str, str], str]:
    """(pip's exit code, {name: version} it would install, its stderr) for `pip install
    --dry-run PIP_ARGS -e ".[train]"` run from the repository root with `site` in front."""
    env = {**os.environ, "PYTHONPATH": str(site), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    dry_run = ["install", "--dry-run", "--report", "-", "--quiet"]
    offline = ["--no-index", "--no-build-isolation"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", *dry_run, *offline, *pip_args, "-e", ".[train]"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        return done.returncode, {}, done.stderr
    report = json.loads(done.stdout)
    names = {item["metadata"]["name"]: item["metadata"]["version"] for item in report["install"]}
    return 0, names, done.stderr


def test_pip_sees_the_stand_in_as_the_installed_torch(cuda_torch: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(cuda_torch)}
    shown = subprocess.run(
        [sys.executable, "-m", "pip", "show", "torch"], env=env, capture_output=True, text=True
    )
    assert f"Version: {CUDA_TORCH}" in shown.stdout.splitlines()


def test_the_train_install_without_constraints_keeps_a_cuda_torch(cuda_torch: Path) -> None:
    code, names, error = would_install(cuda_torch)
    assert code == 0, error
    assert names == {"bertkit": "0.1.0"}  # bertkit alone: torch>=2.4 is already satisfied


def test_constraints_without_the_torch_pin_keep_a_cuda_torch(
    cuda_torch: Path, tmp_path: Path
) -> None:
    # The docs' variant (docs/gpu.md): every tested pin but torch's and its CUDA build's own
    # (triton, nvidia-*), which the CUDA torch installed already brings in its versions.
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    variant = tmp_path / "constraints-gpu.txt"
    own = re.compile(r"^(torch|triton|nvidia-[^=]*)==")
    variant.write_text("\n".join(line for line in pins if not own.match(line)) + "\n")
    code, names, error = would_install(cuda_torch, "-c", str(variant))
    assert code == 0, error
    assert names == {"bertkit": "0.1.0"}


def test_constraints_txt_as_it_is_would_replace_a_cuda_torch(cuda_torch: Path) -> None:
    # Why the docs say to leave it out: its torch==2.13.0 pin (the CPU build's version)
    # replaces any other torch, or fails where no index offers that torch.
    code, names, error = would_install(cuda_torch, "-c", "constraints.txt")
    if code == 0:
        assert names["torch"].startswith("2.13.0") and names["bertkit"] == "0.1.0"
    else:
        assert "torch" in error, error


def test_the_set_up_line_names_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    assert device_shown(torch.device("cpu")) == "cpu"
    # What torch.cuda answers on an H100, without one.
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100 80GB HBM3")
    assert device_shown(torch.device("cuda", 0)) == "cuda:0 (NVIDIA H100 80GB HBM3)"
