"""bench/train_step.py's switches for the GPU runs (bench/gpu_levers.py, bench/gpu_check.sh),
checked on the CPU: which rows --modes, --model, --unpad and --fp8 give, the batches' source, the
profile, fp16's loss-scaled step, synthetic padding."""

from __future__ import annotations

import json

import pytest
import torch

from bench import train_step
from bench.gpu_levers import batch_source, optimizer_step, precision_step, profile_steps
from bench.train_step_batches import synthetic_batches
from schemas.batch import IGNORE_INDEX, BatchField


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
    for flags in (
        ["--profile", "-1"],
        ["--compile-mode", "fast"],
        ["--host-batches", "disk"],
        ["--unpad", "off,sometimes"],
        ["--precision", "fp8"],
        ["--hidden-dropout", "1.5"],
        ["--padding", "0.2"],  # without --synthetic
        ["--synthetic", "--padding", "0.6"],
    ):
        with pytest.raises(SystemExit):
            train_step.parse_args(flags)


def test_unpad_rows_are_bertkit_s_and_transformers_runs_once_padded():
    args = train_step.parse_args(["--model", "tiny", "--unpad", "off,on", "--reference"])
    specs = train_step.row_specs(args, torch.device("cpu"))
    assert [(s.implementation, s.unpad) for s in specs] == [
        ("bertkit", "off"),
        ("transformers", "off"),
        ("bertkit", "on"),
    ]
    assert specs[2].peer() == specs[1]
    args = train_step.parse_args(["--model", "tiny", "--unpad", "off,on", "--modes", "compiled"])
    specs = train_step.row_specs(args, torch.device("cpu"))
    assert [(s.mode, s.unpad) for s in specs] == [("compiled", "off"), ("compiled", "on")]


def test_fp8_rows_are_bertkit_s_and_fp8_refuses_fp16(capsys):
    args = train_step.parse_args(["--model", "large", "--fp8", "off,rowwise", "--reference"])
    specs = train_step.row_specs(args, torch.device("cpu"))
    assert [(s.implementation, s.fp8) for s in specs] == [
        ("bertkit", "off"),
        ("transformers", "off"),
        ("bertkit", "rowwise"),
    ]
    assert specs[2].peer() == specs[1] and args.fp8_layers == "auto"
    for flags, said in (
        (["--fp8", "rowwise", "--precision", "fp16"], "--fp8 rowwise runs with bf16 autocast"),
        (["--fp8", "off,fp4"], "--fp8 'off,fp4': comma-separated, of off, tensorwise, rowwise"),
        (["--fp8-layers", "some"], "--fp8-layers: invalid choice: 'some'"),
    ):
        with pytest.raises(SystemExit):
            train_step.parse_args(flags)
        assert said in capsys.readouterr().err


def test_the_loss_scaled_step_is_the_plain_step_in_fp32():
    """fp16's step (scale, backward, unscale, clip, step, update) on fp32 numbers: the scale
    is a power of two, so the weights after two steps are the plain step's, bit for bit."""
    autocast, scaler = precision_step("fp32", torch.device("cpu"))
    assert scaler is None
    _, scaler = precision_step("fp16", torch.device("cpu"))
    assert scaler is not None and scaler.get_scale() == 2.0**16
    weights = []
    for with_scaler in (None, scaler):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
        for step in range(2):
            x = torch.randn(5, 4, generator=torch.Generator().manual_seed(step))
            with autocast:
                loss = model(x).square().mean() * 100  # norm > 1: the clip acts
            optimizer_step(loss, model, optimizer, with_scaler)
        weights.append([p.detach().clone() for p in model.parameters()])
    for plain, scaled in zip(*weights, strict=True):
        assert torch.equal(plain, scaled)


def test_synthetic_padding_is_the_share_asked_and_predicts_real_tokens_only():
    data = synthetic_batches(seq=64, batch=32, count=32, vocab=500, padding=0.18)
    mask = torch.cat([b[BatchField.ATTENTION_MASK] for b in data.batches])
    assert abs(1 - mask.float().mean().item() - 0.18) < 0.015  # 1,024 sequences
    for batch in data.batches:
        lengths = batch[BatchField.ATTENTION_MASK].sum(1)
        labelled = batch[BatchField.MASKED_LABELS] != IGNORE_INDEX
        positions = batch[BatchField.MASKED_POSITIONS]
        assert (positions[labelled] >= 1).all()
        assert (positions < lengths[:, None]).all() and (positions[~labelled] == 0).all()
        assert labelled.sum(1).tolist() == [max(1, round(0.15 * n)) for n in lengths.tolist()]
        assert (batch[BatchField.INPUT_IDS][~batch[BatchField.ATTENTION_MASK]] == 0).all()
    full = synthetic_batches(seq=64, batch=8, count=1, vocab=500)
    assert full.batches[0][BatchField.ATTENTION_MASK].all()


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


@pytest.mark.parametrize(("flag", "field"), [("--ffn-epilogue", "ffn"), ("--add-norm", "add_norm")])
def test_kernel_rows_are_bertkit_s_and_transformers_runs_once(flag, field, capsys):
    args = train_step.parse_args(["--model", "tiny", flag, "off,on", "--reference"])
    specs = train_step.row_specs(args, torch.device("cpu"))
    assert [(s.implementation, getattr(s, field)) for s in specs] == [
        ("bertkit", "off"),
        ("transformers", "off"),
        ("bertkit", "on"),
    ]
    assert specs[2].peer() == specs[1]
    with pytest.raises(SystemExit):
        train_step.parse_args([flag, "off,auto"])
    assert f"{flag} 'off,auto': comma-separated, of off, on" in capsys.readouterr().err


def test_kernel_rows_run_the_kernels(tmp_path, capsys):
    """--ffn-epilogue off,on --add-norm on: the rows train through the kernels (Triton's
    interpreter on the CPU)."""
    pytest.importorskip("triton", reason="the kernels run in Triton's interpreter here")
    out = tmp_path / "step.json"
    flags = ["--model", "tiny", "--synthetic", "--steps", "1", "--warmup", "0", "--repeats",
             "1", "--batches", "1", "--batch", "2", "--seq", "32", "--threads", "1",
             "--vocab-size", "500", "--device", "cpu", "--ffn-epilogue", "off,on",
             "--add-norm", "on", "--json", str(out)]  # fmt: skip
    assert train_step.main(flags) == 0
    written = json.loads(out.read_text())
    rows = [(r["ffn"], r["add_norm"], r["ok"]) for r in written["rows"]]
    assert rows == [("off", "on", True), ("on", "on", True)]
    config = written["config"]
    assert (config["ffn_epilogue"], config["add_norm"]) == (["off", "on"], ["on"])
    printed = capsys.readouterr().out
    assert "tiny bertkit eager adamw add-norm " in printed
    assert "tiny bertkit eager adamw ffn-epilogue add-norm " in printed
