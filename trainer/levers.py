"""How the model's step runs, set from the run's flags once the model is built: the levers
that change the work done and leave the weights (and, but for --fp8, the results) alone.
Each logs its line on the main rank.

    set_levers(model, config, env, torch.bfloat16)           # before the run's checks end
    choose_kernels(model, config, env, torch.bfloat16, 128)  # once the compile cache is open

- `--unpad`: the real tokens only through the encoder (trainer/attention.py);
- `--fp8`: torchao's FP8 Linears in the encoder (trainer/fp8.py), before DDP and compiling;
- `--ffn-epilogue`: the feed-forward blocks' GELU in the matmuls' kernels
  (trainer/ffn_epilogue.py), timed on the device under auto, after --fp8 has chosen;
- `--add-norm`: each dropout, residual add and LayerNorm in one kernel (trainer/add_norm.py),
  timed the same way.
"""

from __future__ import annotations

import functools
import logging

import torch

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
) -> None:
    """Set --ffn-epilogue and --add-norm on `model`. Under auto each is timed on the device
    (compiled where the run compiles): called once the run's compile cache is open, so a
    requeued job loads those compilations and Triton's tuning, and before torch.compile."""
    layer = model.config
    rows = config.micro_batch_size * max_seq_length
    agree = functools.partial(distributed.all_reduce_sum, env)  # every rank decides alike
    sizes = (rows, layer.hidden_size, layer.intermediate_size)
    epilogue, epilogue_line = choose_ffn_epilogue(
        config.ffn_epilogue, env.device, dtype, config.fp8, sizes, config.compile, agree
    )
    add_norm, add_norm_line = choose_add_norm(
        config.add_norm,
        env.device,
        dtype,
        (rows, layer.hidden_size),
        layer.hidden_dropout_prob,
        config.compile,
        agree,
    )
    model.use_kernels(ffn_epilogue=epilogue, add_norm=add_norm)
    if env.device.type == "cuda":
        torch.cuda.empty_cache()  # what the timing held
    _log(env, [epilogue_line, add_norm_line])


def _log(env: distributed.Distributed, lines: list[str | None]) -> None:
    for line in lines:
        if env.is_main and line:
            _LOG.info(line)
