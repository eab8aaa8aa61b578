"""How the model's step runs, set from the run's flags once the model is built: the levers
that change the work done and leave the weights (and, but for --fp8, the results) alone.
Each logs its line on the main rank.

    set_levers(model, config, env, torch.bfloat16)           # before the run's checks end
    record = choose_kernels(model, config, env, torch.bfloat16, 128, resumed_record)

- `--unpad`: the real tokens only through the encoder (trainer/attention.py);
- `--fp8`: torchao's FP8 Linears in the encoder (trainer/fp8.py), before DDP and compiling;
- `--ffn-epilogue`: the feed-forward blocks' GELU in the matmuls' kernels
  (trainer/ffn_epilogue.py), timed on the device under auto, after --fp8 has chosen;
- `--add-norm`: each dropout, residual add and LayerNorm in one kernel (trainer/add_norm.py),
  timed the same way.

What the kernels' levers took is the checkpoint's `kernels` record (schemas/checkpoint.py):
a resume on the same kind of device takes it again under auto, untimed, so the run goes on
with the numerics it began with (auto's timing may tip the other way on a second try).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch

from schemas.checkpoint import KernelsKey
from trainer import distributed
from trainer.add_norm import choose_add_norm
from trainer.attention import describe_unpad
from trainer.config import TrainConfig
from trainer.ffn_epilogue import choose_ffn_epilogue
from trainer.fp8 import convert_to_fp8, describe_fp8
from trainer.model import BertForPreTraining

_LOG = logging.getLogger("bertkit.train")


def set_levers(
    model: BertForPreTraining,
    config: TrainConfig,
    env: distributed.Distributed,
    dtype: torch.dtype,
) -> None:
    """Set --unpad and --fp8 on `model` for a run computing in `dtype`: before the run's
    checks end (--fp8 may refuse), DDP and torch.compile."""
    model.unpad = config.unpad  # the path training's forwards take, where the kernel runs
    layer = model.config
    lines: list[str | None] = [
        describe_unpad(
            config.unpad, env.device, dtype, layer.head_size, layer.attention_probs_dropout_prob
        )
    ]
    if config.fp8 != "off":  # torchao's Float8Linear, the Parameters kept
        converted = convert_to_fp8(model, config.fp8, config.fp8_layers)  # or refused
        lines.append(describe_fp8(converted, model, config.fp8))
    _log(env, lines)


def choose_kernels(
    model: BertForPreTraining,
    config: TrainConfig,
    env: distributed.Distributed,
    dtype: torch.dtype,
    max_seq_length: int,
    recorded: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Set --ffn-epilogue and --add-norm on `model`, and return the checkpoint's record of
    what they took (KernelsKey). Under auto each is timed on the device (compiled where the
    run compiles), unless `recorded` (a resumed checkpoint's record) was made on this kind of
    device: then the run takes what it took at its start. Called once the run's compile
    cache is open, so a requeued job loads those compilations and Triton's tuning, and
    before torch.compile."""
    layer = model.config
    rows = config.micro_batch_size * max_seq_length
    agree = functools.partial(distributed.all_reduce_sum, env)  # every rank decides alike
    here = device_kind(env.device)
    earlier = recorded if recorded and recorded.get(KernelsKey.DEVICE) == here else {}
    lines: list[str | None] = []
    if recorded and not earlier and "auto" in (config.ffn_epilogue, config.add_norm):
        lines.append(
            f"--resume: the run took its kernels on {recorded.get(KernelsKey.DEVICE)}; on {here} "
            "auto times them again"
        )
    sizes = (rows, layer.hidden_size, layer.intermediate_size)
    epilogue, epilogue_line = choose_ffn_epilogue(
        config.ffn_epilogue,
        env.device,
        dtype,
        config.fp8,
        sizes,
        config.compile,
        agree,
        earlier.get(KernelsKey.FFN_EPILOGUE),
    )
    add_norm, add_norm_line = choose_add_norm(
        config.add_norm,
        env.device,
        dtype,
        (rows, layer.hidden_size),
        layer.hidden_dropout_prob,
        config.compile,
        agree,
        earlier.get(KernelsKey.ADD_NORM),
    )
    model.use_kernels(ffn_epilogue=epilogue, add_norm=add_norm)
    if env.device.type == "cuda":
        torch.cuda.empty_cache()  # what the timing held
    _log(env, [*lines, epilogue_line, add_norm_line])
    return {
        KernelsKey.DEVICE: here,
        KernelsKey.FFN_EPILOGUE: epilogue,
        KernelsKey.ADD_NORM: add_norm,
    }


def device_kind(device: torch.device) -> str:
    """The kind of device a choice of kernels holds for: a GPU's name, or `cpu`."""
    if device.type != "cuda":
        return device.type
    return torch.cuda.get_device_name(device)


def _log(env: distributed.Distributed, lines: list[str | None]) -> None:
    for line in lines:
        if env.is_main and line:
            _LOG.info(line)
