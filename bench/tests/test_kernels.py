"""bench/kernels.py on the CPU: both levers' rows through Triton's interpreter, each checked
against the plain ops; without a GPU, --device cuda is refused in one line."""

from __future__ import annotations

import json

import pytest

from bench import kernels


def test_both_levers_are_timed_and_checked_in_the_interpreter(tmp_path, capsys, monkeypatch):
    pytest.importorskip("triton", reason="the kernels run in Triton's interpreter here")
    tile = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1}  # fewer programs
    monkeypatch.setattr("trainer.triton_kernels.INTERPRETER_TILE", tile)
    # One warm-up and one timed run each: the interpreter's times are no figure anyway.
    monkeypatch.setattr("trainer.kernel_choice._WARMUP_STEPS", 1)
    monkeypatch.setattr("trainer.kernel_choice._TIMED_STEPS", 1)
    out = tmp_path / "kernels.json"
    assert (
        kernels.main(["--device", "cpu", "--model", "tiny", "--rows", "40", "--json", str(out)])
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [(row["lever"], row["model"], row["rows"], row["problem"]) for row in rows] == [
        ("ffn-epilogue", "tiny", 40, None),
        ("add-norm", "tiny", 40, None),
    ]
    assert all(row["plain_ms"] > 0 and row["kernel_ms"] > 0 for row in rows)
    products = json.loads(out.read_text())["products"]
    assert [(row["product"], row["model"], row["rows"]) for row in products] == [
        ("up, x·W1ᵀ + b1", "tiny", 40),
        ("down's input gradient, dz·W2", "tiny", 40),
    ]
    for row in products:  # 2 · 40 rows · 128 · 512 FLOPs (tiny's hidden, intermediate)
        assert row["kernel_tflops"] == pytest.approx(2 * 40 * 128 * 512 / row["kernel_ms"] / 1e9)
    printed = capsys.readouterr().out
    assert "add-norm      tiny     40" in printed
    assert "down's input gradient, dz·W2  tiny" in printed


def test_without_a_gpu_cuda_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        kernels.main(["--model", "base"])
    assert exit_info.value.code == 2
    assert "--device cuda: no CUDA GPU here" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        kernels.main(["--model", "huge", "--device", "cpu"])
    assert "--model huge: choose from tiny, mini" in capsys.readouterr().err
