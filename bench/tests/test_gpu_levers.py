"""bench/train_step.py's switches for the GPU runs (bench/gpu_levers.py, bench/gpu_check.sh),
checked on the CPU: which rows --modes and --model give, the batches' source, the profile."""

from __future__ import annotations

import pytest
import torch

from bench import train_step
from bench.gpu_levers import batch_source, compile_forward, profile_steps, step_marker


def test_modes_pick_the_rows_and_model_adds_no_other_size():
    args = train_step.parse_args(["--model", "large", "--modes", "compiled", "--reference"])
    specs = train_step.row_specs(args, torch.device("cpu"))
    assert [(s.model, s.mode, s.implementation) for s in specs] == [
        ("large", "compiled", "bertkit"),
        ("large", "compiled", "transformers"),
    ]
    args = train_step.parse_args(["--model", "tiny", "--modes", "eager,compiled"])
    assert [s.mode for s in train_step.row_specs(args, torch.device("cpu"))] == [
        "eager",
        "compiled",
    ]


def test_bad_lever_flags_are_refused(capsys):
    with pytest.raises(SystemExit):
        train_step.parse_args(["--modes", "eager,graphs"])
    assert "--modes 'eager,graphs'" in capsys.readouterr().err
    for flags in (["--profile", "-1"], ["--compile-mode", "fast"], ["--host-batches", "disk"]):
        with pytest.raises(SystemExit):
            train_step.parse_args(flags)


def test_eager_forward_and_its_marker_are_the_model_and_a_no_op():
    model = torch.nn.Linear(2, 2)
    assert compile_forward(model, False, "reduce-overhead", None) is model
    assert step_marker(False, "reduce-overhead")() is None
    assert step_marker(True, "reduce-overhead") is torch.compiler.cudagraph_mark_step_begin


def test_batches_cycle_and_host_kinds_fall_back_to_the_device_copy_on_the_cpu():
    inputs = [{"x": torch.full((2,), float(i))} for i in range(3)]
    for where in ("device", "pinned", "pageable"):
        fetch = batch_source(inputs, where, torch.device("cpu"))
        assert [float(fetch(i)["x"][0]) for i in range(4)] == [0.0, 1.0, 2.0, 0.0]


def test_profile_lists_the_step_s_operators_with_their_share():
    weight = torch.randn(64, 64)

    def step(index: int) -> None:
        (weight @ weight).relu().sum()

    kernels = profile_steps(step, 2, 0, torch.device("cpu"))
    assert kernels and all(0.0 <= k["share"] <= 1.0 for k in kernels)
    assert sum(k["share"] for k in kernels) <= 1.0 + 1e-9
    assert any("mm" in k["name"] for k in kernels)
