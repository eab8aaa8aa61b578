"""FP8 matrix products for the encoder (`bertkit train --fp8`), through torchao's float8
training: each chosen `nn.Linear` becomes torchao's `Float8Linear`, which casts its input,
weight and output gradient to float8 (e4m3) with dynamic scales, multiplies them with
`torch._scaled_mm` and keeps the weights, their gradients and the optimizer in the run's
own precision.

    names = fp8_layers(model, "rowwise", "all")   # which Linears would convert
    convert_to_fp8(model, "rowwise", "all")        # before DDP and torch.compile

- The recipes: tensorwise (one scale per tensor, the faster) and rowwise (one scale per row
  or column, the more accurate: the one MLPerf-style large runs take), as torchao names them.
- The layers: only the encoder's four Linears per layer (Q/K/V, attention output,
  intermediate, output), which run on every token. The MLM head's matmuls run on the
  masked positions only, the pooler and NSP head on one position: FP8's casts would cost
  more than they save there. `--fp8-layers auto` keeps those whose shapes torchao's own
  H100 tables show faster in FP8 than in bf16 (`_auto_filter_for_recipe`); `all` takes
  every encoder Linear whose dimensions are multiples of 16, as FP8's matmul requires.
- The weights stay what they are: a `Float8Linear` holds the same Parameters under the same
  names, so checkpoints, --resume (with or without --fp8), export-hf and evaluation are
  unchanged, and a run may switch FP8 on or off at a resume.
- Where: a GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell), in bf16 or fp32;
  fp16 autocast is refused (every such GPU has bf16). On the CPU, torch's own `_scaled_mm`
  computes the same FP8 numerics slowly (`cpu_products`): for tests and dry runs of a GPU
  job's flags.
- FP8 is not the plain step's equal: each product is rounded to 3 mantissa bits before it
  is accumulated, so the default is off and the flag an explicit choice.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from pipelines.io.extras import extra_problem
from trainer.choices import FP8_LAYERS, FP8_NOT_FP16, FP8_RECIPES

FP8_CAPABILITY = (8, 9)  # Ada (sm89) and newer compute FP8 matrix products
# The encoder layer's Linears (trainer/model.py BertLayer), each run on every token.
ENCODER_LINEARS = ("qkv", "attention_output", "intermediate", "output")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torchao's imports (at first use, and lazily while converting) log warnings that are
    not the user's to act on, quieted here: on a CPU build of torch, one per CUDA library of
    torchao's it cannot load (the float8 training path this module takes is Python over
    torch's own ops), and torch's deprecation note on each enum torchao registers with
    torch.compile."""
    loggers = [logging.getLogger("torch.utils._pytree")]
    if torch.version.cuda is None:
        loggers.append(logging.getLogger("torchao"))
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _torchao(module: str = "torchao.float8") -> Any:
    """A torchao module, imported quietly (`_quiet`)."""
    with _quiet():
        return importlib.import_module(module)


@contextlib.contextmanager
def cpu_products(recipe: str, device: torch.device) -> Iterator[None]:
    """Within it, an FP8 run on the CPU multiplies through torch's emulated `_scaled_mm`.

    On a CPU with AMX, torch hands FP8 products to oneDNN, whose FP8 matmul there is its
    reference kernel: hundreds of times slower than torch's emulation (upcast to fp32,
    multiply, scale), with the scales applied in another order, so products that are exact
    in the emulation come out rounded. oneDNN's switch is process-wide; it is off only for
    the run (a CPU run of fp32 products takes BLAS, not oneDNN) and restored after it. A
    GPU run, or one without --fp8, is left as it is."""
    if recipe == "off" or device.type != "cpu":
        yield
        return
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


def fp8_problem(recipe: str, precision: str, device: torch.device) -> str | None:
    """Why `--fp8 recipe` cannot run in `precision` on `device`, or None where it can:
    checked before any work."""
    if recipe == "off":
        return None
    # The device first: --precision auto is fp16 only on a GPU without bf16, which has no
    # FP8 either, and the fp16 line's "pass --precision bf16" would not help there.
    if device.type == "cuda":
        capability = torch.cuda.get_device_capability(device)
        if capability < FP8_CAPABILITY:
            return (
                f"--fp8 {recipe}: {torch.cuda.get_device_name(device)} (compute capability "
                f"{capability[0]}.{capability[1]}) has no FP8 matrix products; they need 8.9 "
                "(Ada, Hopper or newer): leave --fp8 off"
            )
    if precision == "fp16":
        return FP8_NOT_FP16.format(recipe=recipe)
    absent = extra_problem(f"--fp8 {recipe}", "gpu")
    if absent:
        return absent
    try:
        _torchao()
    except ImportError as error:  # installed, but not for this torch
        return f"--fp8 {recipe}: torchao is installed but fails to import: {error}"
    return None


def _encoder_linear(name: str, module: nn.Module) -> bool:
    parts = name.split(".")
    return (
        isinstance(module, nn.Linear)
        and len(parts) == 3
        and parts[0] == "layers"
        and parts[2] in ENCODER_LINEARS
    )


def fp8_layers(model: nn.Module, recipe: str, layers: str) -> list[str]:
    """The names of the Linears `--fp8 recipe --fp8-layers layers` converts, in model order
    (module docstring): the encoder's, whose dimensions are multiples of 16, and for `auto`
    those torchao's H100 tables show faster in FP8."""
    if recipe not in FP8_RECIPES[1:]:
        raise ValueError(f"--fp8 {recipe!r}: one of {', '.join(FP8_RECIPES[1:])}")
    if layers not in FP8_LAYERS:
        raise ValueError(f"--fp8-layers {layers!r}: one of {', '.join(FP8_LAYERS)}")
    keep: Callable[[nn.Module, str], bool]
    if layers == "auto":
        utils = _torchao("torchao.float8.float8_linear_utils")
        keep = utils._auto_filter_for_recipe(recipe, filter_fqns=[])
    else:
        keep = _multiples_of_16
    return [
        name
        for name, module in model.named_modules()
        if _encoder_linear(name, module) and keep(module, name)
    ]


def _multiples_of_16(module: nn.Module, name: str) -> bool:
    out_features, in_features = module.weight.shape  # type: ignore[union-attr]
    return out_features % 16 == 0 and in_features % 16 == 0


def convert_to_fp8(model: nn.Module, recipe: str, layers: str) -> list[str]:
    """Swap the Linears `fp8_layers` names for torchao's Float8Linear in place (their
    Parameters kept), and return those names. Refused when none qualifies: a run that asked
    for FP8 and got none would be a bf16 run under another name."""
    names = fp8_layers(model, recipe, layers)
    if not names:
        shapes = sorted(
            {
                tuple(module.weight.shape)
                for name, module in model.named_modules()
                if _encoder_linear(name, module)
            }
        )
        shown = ", ".join(f"{out}×{inp}" for out, inp in shapes)
        if layers == "all":
            why = "has dimensions that are multiples of 16, as FP8 matmuls need"
        else:
            other = "try --fp8 tensorwise, or " if recipe == "rowwise" else ""
            why = (
                "is faster in FP8 by torchao's H100 tables for this recipe: "
                f"{other}add --fp8-layers all to convert them anyway"
            )
        raise ValueError(
            f"--fp8 {recipe} --fp8-layers {layers}: no encoder Linear of this model ({shown}, "
            f"out × in) {why}"
        )
    float8 = _torchao()
    config = float8.Float8LinearConfig.from_recipe_name(recipe)
    chosen = set(names)
    with _quiet():
        float8.convert_to_float8_training(
            model, config=config, module_filter_fn=lambda module, name: name in chosen
        )
    return names


def describe_fp8(names: list[str], model: nn.Module, recipe: str) -> str:
    """One log line: how many of the encoder's Linears run in FP8, and which kinds."""
    total = sum(1 for name, module in model.named_modules() if _encoder_linear(name, module))
    kinds = sorted({name.rsplit(".", 1)[1] for name in names}, key=ENCODER_LINEARS.index)
    return (
        f"--fp8 {recipe}: {len(names)} of the encoder's {total} Linears multiply in FP8 "
        f"(torchao): {', '.join(kinds)}"
    )
