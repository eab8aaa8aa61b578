"""`bertkit train --fp8` (trainer/fp8.py): which Linears torchao's Float8Linear takes, that
they keep the model's Parameters, that their FP8 products are the exact products where the
inputs are exact in e4m3, that a run trains close to fp32 and resumes without FP8, and the
refusals. torchao's float8 path runs on torch's own CPU `_scaled_mm` here, emulated, as a
CPU run's does (`cpu_products`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from pipelines.inspect.checkpoints import describe_checkpoints, find_checkpoints
from tests.test_precision import COMMON, literal_tiny, train_losses
from trainer import train
from trainer.config import TrainConfig
from trainer.fp8 import convert_to_fp8, cpu_products, fp8_layers, fp8_problem
from trainer.model import BertForPreTraining, config_for

ENCODER = ("qkv", "attention_output", "intermediate", "output")


def meta_model(size: str) -> BertForPreTraining:
    """A model of `size` with no storage: its Linears' shapes only."""
    with torch.device("meta"):
        return BertForPreTraining(config_for(size, 30522))


def literal_batch() -> tuple[torch.Tensor, ...]:
    ids = torch.randint(5, 50, (2, 12), generator=torch.Generator().manual_seed(1))
    return (
        ids,
        torch.zeros_like(ids),
        torch.ones_like(ids, dtype=torch.bool),
        torch.tensor([[1, 2], [3, 4]]),
        torch.tensor([[7, 8], [9, -100]]),
        torch.tensor([0, 1]),
    )


def test_all_takes_every_encoder_linear_and_nothing_else() -> None:
    expected = [f"layers.{i}.{kind}" for i in range(2) for kind in ENCODER]
    assert fp8_layers(literal_tiny(), "rowwise", "all") == expected


def test_auto_takes_what_torchaos_h100_tables_show_faster() -> None:
    # BERT-base (768 × 3072) and -large (1024 × 4096): tensorwise pays for the wide Q/K/V
    # and intermediate products; rowwise, whose casts cost more, for none of them.
    for size, layers in (("base", 12), ("large", 24)):
        model = meta_model(size)
        expected = [f"layers.{i}.{kind}" for i in range(layers) for kind in ("qkv", "intermediate")]
        assert fp8_layers(model, "tensorwise", "auto") == expected
        assert fp8_layers(model, "rowwise", "auto") == []
        assert len(fp8_layers(model, "rowwise", "all")) == 4 * layers


def test_a_recipe_that_converts_no_layer_is_refused() -> None:
    with pytest.raises(ValueError) as refused:
        convert_to_fp8(meta_model("large"), "rowwise", "auto")
    assert str(refused.value) == (
        "--fp8 rowwise --fp8-layers auto: no encoder Linear of this model (1024×1024, "
        "1024×4096, 3072×1024, 4096×1024, out × in) is faster in FP8 by torchao's H100 tables "
        "for this recipe: try --fp8 tensorwise, or add --fp8-layers all to convert them anyway"
    )


def test_the_converted_model_keeps_its_parameters_and_state_dict() -> None:
    model = literal_tiny()
    parameters = dict(model.named_parameters())
    state = {name: value.clone() for name, value in model.state_dict().items()}
    names = convert_to_fp8(model, "rowwise", "all")
    assert len(names) == 8
    kinds = {
        name: type(module).__name__
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
    }
    assert {name for name, kind in kinds.items() if kind == "Float8Linear"} == set(names)
    assert {kinds[name] for name in ("decoder", "mlm_transform", "pooler", "nsp")} == {"Linear"}
    # The same Parameter objects (the optimizer's), and the checkpoint's keys and values.
    assert all(p is parameters[n] for n, p in model.named_parameters())
    after = model.state_dict()
    assert list(after) == list(state)
    assert all(torch.equal(after[name], value) for name, value in state.items())


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fp8_products_of_e4m3_exact_values_are_exact(recipe: str) -> None:
    # Integers from -2 to 2 survive any power-of-two scale into e4m3 (3 mantissa bits), and
    # their sums are exact in fp32: the output and both gradients equal the plain products.
    generator = torch.Generator().manual_seed(3)
    layer = nn.Linear(32, 16)
    with torch.no_grad():
        layer.weight.copy_(torch.randint(-2, 3, (16, 32), generator=generator).float())
        layer.bias.copy_(torch.randint(-3, 4, (16,), generator=generator).float())
    model = nn.Sequential()
    model.add_module("layers", nn.ModuleList([nn.Module()]))
    model.layers[0].add_module("qkv", layer)
    assert convert_to_fp8(model, recipe, "all") == ["layers.0.qkv"]
    inputs = torch.randint(-2, 3, (8, 32), generator=generator).float().requires_grad_()
    upstream = torch.randint(-2, 3, (8, 16), generator=generator).float()
    with cpu_products(recipe, torch.device("cpu")):
        output = model.layers[0].qkv(inputs)
        output.backward(upstream)
    torch.testing.assert_close(output, inputs @ layer.weight.T + layer.bias, atol=0, rtol=0)
    torch.testing.assert_close(inputs.grad, upstream @ layer.weight, atol=0, rtol=0)
    torch.testing.assert_close(layer.weight.grad, upstream.T @ inputs.detach(), atol=0, rtol=0)


def test_an_fp8_run_on_the_cpu_turns_onednn_off_for_its_products_only() -> None:
    # oneDNN's FP8 matmul on an AMX CPU is its reference kernel: slow, and rounded otherwise.
    assert torch.backends.mkldnn.enabled
    with cpu_products("tensorwise", torch.device("cpu")):
        assert not torch.backends.mkldnn.enabled
    assert torch.backends.mkldnn.enabled
    with pytest.raises(RuntimeError), cpu_products("rowwise", torch.device("cpu")):
        raise RuntimeError("a failed step")
    assert torch.backends.mkldnn.enabled
    for recipe, device in (("off", "cpu"), ("rowwise", "cuda")):
        with cpu_products(recipe, torch.device(device)):
            assert torch.backends.mkldnn.enabled


@pytest.mark.parametrize(("recipe", "cosine"), [("tensorwise", 0.995), ("rowwise", 0.998)])
def test_the_fp8_model_is_close_to_fp32_and_not_equal(recipe: str, cosine: float) -> None:
    plain, fp8 = literal_tiny(), literal_tiny()
    convert_to_fp8(fp8, recipe, "all")
    with cpu_products(recipe, torch.device("cpu")):
        losses = [model(*literal_batch()).loss for model in (plain, fp8)]
        for loss in losses:
            loss.backward()
    assert losses[1].item() != losses[0].item()  # FP8 products really ran
    assert losses[1].item() == pytest.approx(losses[0].item(), abs=2e-3)
    for (name, a), b in zip(plain.named_parameters(), fp8.parameters(), strict=True):
        similarity = torch.nn.functional.cosine_similarity(a.grad.flatten(), b.grad.flatten(), 0)
        assert similarity > cosine, name


def test_an_fp8_run_trains_close_to_fp32_and_resumes_without_fp8(
    sample_shards, tmp_path, caplog
) -> None:
    shards = ["--shards", str(sample_shards)]
    fp8_run, plain_run = tmp_path / "fp8", tmp_path / "fp32"
    fp8_flags = ["--fp8", "rowwise", "--fp8-layers", "all"]
    with caplog.at_level("INFO", logger="bertkit.train"):
        assert train.run([*COMMON, *shards, "--output", str(fp8_run), *fp8_flags]) == 0
    assert (
        "--fp8 rowwise: 8 of the encoder's 8 Linears multiply in FP8 (torchao): qkv, "
        "attention_output, intermediate, output"
    ) in caplog.messages
    assert "  seed 12345, precision auto, fp8 rowwise (--fp8-layers all), device auto" in (
        checkpoint_summary(fp8_run)
    )
    assert train.run([*COMMON, *shards, "--output", str(plain_run)]) == 0
    fp8, fp32 = train_losses(fp8_run), train_losses(plain_run)
    assert len(fp8) == 4 and fp8 != fp32
    assert fp8 == pytest.approx(fp32, abs=0.02)
    # Its checkpoint is a plain model's: the run goes on without FP8.
    longer = [*COMMON, "--max-steps", "6"]  # the last --max-steps is argparse's
    assert train.run([*longer, *shards, "--output", str(fp8_run), "--resume"]) == 0
    rows = [json.loads(line) for line in (fp8_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert "  seed 12345, precision auto, device auto" in checkpoint_summary(fp8_run)


def checkpoint_summary(run: Path) -> list[str]:
    """`bertkit inspect RUN`'s lines on the run's checkpoints and the latest one."""
    found = find_checkpoints(str(run))
    assert found is not None
    return describe_checkpoints(found)


def flags_refusal(**fields: object) -> str:
    with pytest.raises(ValueError) as refused:
        TrainConfig(shards="s", output="o", **fields).validate()  # type: ignore[arg-type]
    return str(refused.value)


def test_flags_that_cannot_go_together_are_refused() -> None:
    assert flags_refusal(fp8_layers="all") == (
        "--fp8-layers all chooses --fp8's layers: add --fp8 tensorwise or rowwise, or leave "
        "--fp8-layers out"
    )
    assert flags_refusal(fp8="rowwise", precision="fp16") == (
        "--fp8 rowwise runs with bf16 autocast or in fp32, not with fp16's loss scaling: every "
        "GPU with FP8 matrix products has bf16; pass --precision bf16 (or auto)"
    )
    assert flags_refusal(fp8="fp4") == "--fp8 'fp4': one of off, tensorwise, rowwise"


def test_a_gpu_before_ada_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    assert fp8_problem("rowwise", "bf16", torch.device("cuda", 0)) == (
        "--fp8 rowwise: NVIDIA A100-SXM4-80GB (compute capability 8.0) has no FP8 matrix "
        "products; they need 8.9 (Ada, Hopper or newer): leave --fp8 off"
    )
    # A V100 under --precision auto (fp16 there): the device is what stands in the way.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    assert fp8_problem("rowwise", "fp16", torch.device("cuda", 0)) == (
        "--fp8 rowwise: Tesla V100-SXM2-16GB (compute capability 7.0) has no FP8 matrix "
        "products; they need 8.9 (Ada, Hopper or newer): leave --fp8 off"
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert fp8_problem("rowwise", "bf16", torch.device("cuda", 0)) is None


@pytest.mark.slow
def test_an_fp8_run_compiles_and_trains(sample_shards, tmp_path) -> None:
    # torch.compile over torchao's Float8Linear (its casts fused by inductor): a minute on
    # the CPU, so in the slow tier; the compiled run's losses are the eager FP8 run's, near.
    flags = [*COMMON, "--shards", str(sample_shards), "--fp8", "rowwise", "--fp8-layers", "all"]
    assert train.run([*flags, "--output", str(tmp_path / "eager")]) == 0
    assert train.run([*flags, "--output", str(tmp_path / "compiled"), "--compile"]) == 0
    compiled, eager = train_losses(tmp_path / "compiled"), train_losses(tmp_path / "eager")
    assert len(compiled) == 4
    assert compiled == pytest.approx(eager, abs=0.02)
