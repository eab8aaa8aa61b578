"""bench/kernel_codegen.py: bertkit's Triton kernels compiled for Ampere and Hopper on this
CPU, as the JIT would build them on those GPUs, and their machine code checked. Each run is
a child process, where Triton compiles (the tests' own Triton interprets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.kernel_codegen import SHARED_LIMIT, Row
from bench.measure import REPO_ROOT


def _compile(tmp_path, *argv: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    command = [sys.executable, "-c", code, *argv] if code else [sys.executable, "-m", *argv]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_each_kernel_is_built_on_tensor_cores_pipelined_and_within_the_gpus_limits(tmp_path):
    pytest.importorskip("triton", reason="compiles with Triton")
    out = tmp_path / "codegen.json"
    run = _compile(
        tmp_path, "bench.kernel_codegen", "--arch", "90", "--model", "base", "--tiles", "1",
        "--json", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())["rows"]
    kernels = [
        "ffn forward", "ffn backward", "add-norm forward, dropout", "add-norm backward, dropout",
        "add-norm forward, no dropout", "add-norm backward, no dropout",
    ]  # fmt: skip
    norms = ["1 row/4", "1 row×16/4"] * 2
    # The first tile each way: through pointers, and (Hopper) through TMA. Ampere's code is
    # the next test's.
    tiles = [(kernel, "128×256×64/3/8" + way) for way in ("", " TMA") for kernel in kernels[:2]]
    assert [(row["arch"], row["kernel"], row["tile"]) for row in rows] == [
        (90, kernel, tile) for kernel, tile in tiles + list(zip(kernels[2:], norms, strict=True))
    ]
    for row in rows:
        assert row["problems"] == [], row
        assert row["spilled"] == 0 and 0 < row["registers"] <= 255
        assert row["shared"] <= SHARED_LIMIT[row["arch"]]
    matmuls = [row for row in rows if row["kernel"].startswith("ffn")]
    assert all(row["tensor_cores"] and row["pipelined"] for row in matmuls)  # TMA's: bulk
    assert all(row["vectorized"] for row in rows if row not in matmuls)
    # Two stages' A and B tiles at least (128×64 + 64×256 bf16 each): loads run ahead.
    assert all(row["shared"] >= 2 * (128 * 64 + 64 * 256) * 2 for row in matmuls)
    assert "ffn forward" in run.stdout and "none" in run.stdout


def test_an_unpipelined_tile_is_named_and_fails(tmp_path):
    pytest.importorskip("triton", reason="compiles with Triton")
    code = (
        "import sys, torch, bench.kernel_codegen as codegen\n"
        "from trainer import triton_kernels\n"
        "one_stage = triton_kernels.tile_config((128, 128, 64, 8, 1, 8), False)  # no loads ahead\n"
        "triton_kernels.TUNED.configs = [one_stage]\n"
        "sys.exit(codegen.main(['--arch', '80', '--model', 'base', '--json', sys.argv[1]]))\n"
    )
    out = tmp_path / "codegen.json"
    run = _compile(tmp_path, str(out), code=code)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.count("no cp.async: the tiles' loads are not pipelined") == 2
    assert "2 of 6 kernels are not built as a fast kernel is" in run.stdout
    # All else of Ampere's code is as it should be: mma.sync, 128-bit rows, within limits.
    rows = json.loads(out.read_text())["rows"]
    assert [(row["kernel"], row["problems"]) for row in rows[:2]] == [
        (kernel, ["no cp.async: the tiles' loads are not pipelined"])
        for kernel in ("ffn forward", "ffn backward")
    ]
    assert all(row["tensor_cores"] and row["spilled"] == 0 for row in rows[:2])
    assert all(row["vectorized"] and row["problems"] == [] for row in rows[2:])


def test_each_problem_is_named():
    fine = Row("ffn forward", "base", 80, "t", 1024, 200, 0, True, True, None)
    assert fine.problems == []
    bad = Row("ffn forward", "base", 80, "t", 200 * 1024, 256, 16, False, False, False)
    assert bad.problems == [
        "204800 bytes of shared memory, over 166912",
        "256 registers",
        "16 bytes spilled to local memory",
        "no mma.sync: the product is not on tensor cores",
        "no cp.async: the tiles' loads are not pipelined",
        "no 128-bit loads and stores: the rows move a word at a time",
    ]
    norm = Row("add-norm forward", "large", 90, "t", 4096, 60, 0, None, None, True)
    assert norm.problems == []


def test_arguments_are_checked(capsys, monkeypatch):
    from bench import kernel_codegen

    for argv, message in (
        (["--model", "huge"], "--model huge: choose from base, large"),
        (["--arch", "75"], "--arch 75: one of 80, 86, 89, 90, 100"),
        (["--arch", "sm90"], "--arch sm90: compute capabilities such as 80,86,90"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            kernel_codegen.main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    # In this process Triton interprets (tests/conftest.py); where it is absent, one line.
    with pytest.raises(SystemExit):
        kernel_codegen.main(["--arch", "90"])
    assert "Triton was imported in its interpreter" in capsys.readouterr().err
    monkeypatch.setattr(kernel_codegen, "triton_available", lambda: False)
    with pytest.raises(SystemExit):
        kernel_codegen.main(["--arch", "90"])
    assert (
        "error: Triton is not installed (torch's CUDA wheels bring it; on a CPU: "
        ".venv/bin/pip install -c constraints.txt triton)"
    ) in capsys.readouterr().err
