"""`--device cuda` where torch cannot use a GPU: one line naming why and what to do, exit 2,
before any work (no run directory made)."""

from __future__ import annotations

import pytest
import torch

from trainer import train

GPU_DOCS = "docs/gpu.md#install-on-a-gpu-machine"


def run_on_cuda(tmp_path) -> int:
    # No shards needed: the device is refused before anything is read.
    flags = ["--shards", str(tmp_path / "shards"), "--output", str(tmp_path / "run")]
    return train.run([*flags, "--device", "cuda", "--model", "tiny", "--max-steps", "2"])


@pytest.mark.skipif(torch.version.cuda is not None, reason="a CUDA build of torch")
def test_cuda_on_a_cpu_only_torch_is_one_line(tmp_path, capsys):
    assert run_on_cuda(tmp_path) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"bertkit train: error: --device cuda: this torch is a CPU-only build (torch "
        f"{torch.__version__}); install a CUDA build: see {GPU_DOCS}"
    ]
    assert captured.out == "" and not (tmp_path / "run").exists()


def test_cuda_where_a_cuda_torch_sees_no_gpu_is_one_line(tmp_path, capsys, monkeypatch):
    """A CUDA build on a machine without a GPU (or with none visible), as
    torch.version.cuda and torch.cuda.is_available() report it there."""
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run_on_cuda(tmp_path) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"bertkit train: error: --device cuda: this torch (torch {torch.__version__}, CUDA "
        "12.4) sees no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES, or pass --device "
        f"cpu; see {GPU_DOCS}"
    ]
    assert not (tmp_path / "run").exists()


def test_more_processes_than_gpus_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert run_on_cuda(tmp_path) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bertkit train: error: --device cuda: LOCAL_RANK 2, but this machine shows 2 GPUs: "
        "start at most 2 processes a node (torchrun --nproc-per-node 2)"
    ]
