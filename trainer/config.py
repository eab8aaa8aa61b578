"""`bertkit train`: BERT pre-training (MLM + NSP, or MLM alone) on bertkit shards, one process
or many.

    bertkit train --shards out/demo/shards --output out/run --model tiny \\
        --micro-batch-size 32 --max-steps 600 --lr 1e-3 --warmup-steps 60

    torchrun --nnodes 4 --nproc-per-node 8 --rdzv-endpoint HOST:29400 -m trainer.train \\
        --shards s3://bucket/shards --max-seq-length 128 --output /ckpt/run --model base \\
        --micro-batch-size 128 --global-batch-size 8192 --optimizer lamb --lr 6e-3 \\
        --warmup-steps 2000 --max-steps 7038 --decay-power 0.5 --shuffle-buffer 65536 \\
        --compile

    # phase 2: the seq-512 shards, starting from phase 1's weights
    bertkit train --shards s3://bucket/shards --max-seq-length 512 --output /ckpt/run512 \\
        --init-checkpoint /ckpt/run/checkpoints --model base ...

    # a mix of corpora: 70 % of every global batch from one, 30 % from the other
    bertkit train --shards out/law/shards out/demo/shards --mix 0.7,0.3 --output out/law \\
        --init-checkpoint out/run/checkpoints --model tiny ...

Shards are streamed from disk, s3://, gs:// or http(s)://, never downloaded first.
--objective and --masking (by default `auto`: what the shards hold) choose the recipe; with
--masking dynamic the loader draws new masks every epoch. Micro-batches are accumulated to
the global batch, gradients are clipped, the optimizer and the warmup/decay schedule step.
Every --log-every steps the metrics go to OUTPUT/metrics.jsonl, TensorBoard (event files in
OUTPUT) and the progress line; every --eval-every steps the first --eval-batches ×
--micro-batch-size held-out sequences are evaluated (--eval-batches 0: all of them), the
same ones on any number of processes (in a mix, each source's, and the mix's figures
weighted by --mix); every --checkpoint-every steps (and at the end)
OUTPUT/checkpoints/step-NNNNNNNN.pt is written. With --objective mlm the model has no NSP
head: no NSP loss or accuracy anywhere.

`--resume` continues from OUTPUT/checkpoints/latest: weights, optimizer, every rank's random
state and the data position, so with the same flags the losses are those of an uninterrupted
run. A new --max-steps, --warmup-steps, --decay-power or --lr sets the schedule from the
resumed step on, and the log says what changed. A resume may use any number of processes and
loader workers: it reads the uninterrupted run's next global batches. It needs the same
global batch, --seed, --shuffle-buffer and --bucket-window (and --micro-batch-size when
bucketing), the same masking flags and the same shards, and says in one line which flag
differs. A run stopped before its first checkpoint starts again, so a requeued job always
passes the same flags.

Exit codes: 0 done, 1 an error during the run, 2 refused before the first step, 75
preempted (checkpoint written) or the run lock lost (nothing more written), 130 interrupted;
a signal in its first seconds, while its modules load, ends `bertkit train` with 130 (SIGINT)
or 143 (SIGTERM) and nothing done.

Read on: docs/training.md (torchrun, SLURM, Kubernetes, preemption, export), docs/gpu.md
(install, precision, compiling), docs/recipes.md (dynamic masking, MLM only, full sentences,
elastic resume).
"""

# For code readers: `bertkit train`'s flags, `TrainConfig`, one field per flag, checked by
# `validate()`; the text above is the command's --help. This module imports nothing that
# needs torch, so the help works in an install without the train extra (bertkit/cli.py). The
# checkpoint stores the config resolved (schemas/checkpoint.py); `accumulation_steps` turns
# the batch flags into micro-batches per optimizer step. The loop is trainer/train.py's.

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pipelines.command.flags import (
    AT_LEAST_1,
    FRACTION,
    POSITIVE,
    ZERO_OR_MORE,
    Bounds,
    config_problem,
    flag_name,
    float_list,
    option,
    parse_config,
)
from pipelines.io.places import repeated_place, same_place_key
from schemas.examples import SHARDS_MANIFEST_NAME
from trainer.choices import (
    COMPILE_MODES,
    FP8_LAYERS,
    FP8_NOT_FP16,
    FP8_RECIPES,
    KERNEL_MODES,
    MODEL_SIZES,
    OPTIMIZERS,
    PRECISIONS,
    UNPAD_MODES,
)
from trainer.run.location import check_run_location


@dataclass(frozen=True)
class TrainConfig:
    """Every flag of `bertkit train`; the checkpoint stores it resolved."""

    shards: tuple[str, ...] = option(
        help="shards directory, its manifest.json, or a shard URL pattern; several (a mix "
        "of corpora) with --mix",
        metavar="SHARDS",
    )
    output: str = option(help="run directory: checkpoints/, metrics.jsonl, TensorBoard events")
    mix: tuple[float, ...] | None = option(
        None,
        parse=float_list,
        bounds=POSITIVE,
        metavar="W,W,...",
        help="with several --shards: each one's share of every global batch, one weight per "
        "source in --shards order, e.g. 0.7,0.3; weights are normalised to sum to 1 (7,3 is "
        "0.7,0.3)",
    )
    model: str | None = option(
        None,
        help="tiny, mini, small, medium, base, large (default: base, or the --init-checkpoint "
        "model's own)",
    )
    max_seq_length: int | None = option(
        None, help="which seqN shards (required if several)", bounds=AT_LEAST_1
    )
    micro_batch_size: int = option(
        32, help="sequences per process per forward pass", bounds=AT_LEAST_1
    )
    global_batch_size: int | None = option(
        None, help="sequences per optimizer step (default micro × ranks)", bounds=AT_LEAST_1
    )
    max_steps: int = option(
        1000, help="optimizer steps; the schedule decays to 0 here", bounds=AT_LEAST_1
    )
    stop_at_step: int | None = option(
        None,
        help="stop early (a job's time slice); --resume goes on. 0: write the model the run "
        "starts from as step 0's checkpoint, and stop",
        bounds=ZERO_OR_MORE,
    )
    optimizer: str = option("adamw", help="adamw or lamb")
    lr: float = option(1e-4, help="peak learning rate", bounds=POSITIVE)
    weight_decay: float = option(
        0.01, help="AdamW/LAMB weight decay (not on biases and LayerNorm)", bounds=ZERO_OR_MORE
    )
    beta1: float = option(0.9, help="first-moment decay", bounds=FRACTION)
    beta2: float = option(0.999, help="second-moment decay", bounds=FRACTION)
    eps: float = option(1e-6, help="optimizer epsilon", bounds=POSITIVE)
    warmup_steps: int | None = option(
        None,
        help="linear warmup steps (default: a tenth of --max-steps, at most 100)",
        bounds=ZERO_OR_MORE,
    )
    decay_power: float = option(
        1.0, help="1 = linear decay (BERT), 0.5 = NVIDIA's LAMB recipe", bounds=POSITIVE
    )
    clip_grad_norm: float = option(1.0, help="0 turns clipping off", bounds=ZERO_OR_MORE)
    max_position_embeddings: int | None = option(
        None,
        help="the model's positions (default: the preset's 512, or the shards' sequence "
        "length where longer; a checkpoint's model keeps its own)",
        bounds=AT_LEAST_1,
    )
    dropout: float | None = option(
        None,
        help="--hidden-dropout and --attention-dropout both at this rate (default: the "
        "model's, 0.1 for a new one)",
        bounds=FRACTION,
    )
    hidden_dropout: float | None = option(
        None,
        help="dropout on the embeddings and on each layer's attention and feed-forward output "
        "(default: the model's, 0.1 for a new one as in BERT 2018; cramming trains with 0)",
        bounds=FRACTION,
    )
    attention_dropout: float | None = option(
        None,
        help="dropout on the attention probabilities (default: the model's, 0.1 for a new one; "
        "MosaicBERT and cramming train with 0)",
        bounds=FRACTION,
    )
    # torch.manual_seed takes up to 2**64 - 1, and each rank adds its number to the seed.
    seed: int = option(
        12345, help="seeds the data order, dropout and initialisation", bounds=Bounds(0, 2**63 - 1)
    )
    num_workers: int = option(2, help="loader processes per rank", bounds=ZERO_OR_MORE)
    shuffle_buffer: int = option(
        10_000,
        help="samples shuffled together, in whole global batches; best many of them (0 = off)",
        bounds=ZERO_OR_MORE,
    )
    bucket_window: int = option(
        0,
        help="batch by length: sort W global batches' samples by length (0 = off)",
        bounds=ZERO_OR_MORE,
    )
    objective: str = option(
        "auto",
        choices=("auto", "mlm+nsp", "mlm"),
        help="mlm+nsp (BERT 2018) or mlm (no NSP head, loss or label; RoBERTa); auto: mlm+nsp "
        "on sentence-pair shards, mlm on full-sentence shards",
    )
    masking: str = option(
        "auto",
        choices=("auto", "static", "dynamic"),
        help="static: the shards' stored masks (BERT 2018); dynamic: masks drawn afresh each "
        "epoch from (seed, epoch, sample key); auto: static where the shards hold masks",
    )
    mask_rate: float = option(
        0.15, help="--masking dynamic: share of tokens predicted", bounds=Bounds(0, 1, True, True)
    )
    mask_replace: str = option(
        "80/10/10",
        help="--masking dynamic: percent of predicted tokens replaced by [MASK]/kept/random",
    )
    whole_word_mask: bool = option(
        False, help="--masking dynamic: mask whole words (a piece and its ## pieces)"
    )
    max_predictions: int | None = option(
        None,
        help="--masking dynamic: most predictions a sequence (default round(length × rate))",
        bounds=AT_LEAST_1,
    )
    vocab: str | None = option(
        None,
        help="the shards' vocabulary directory where it moved, a `bertkit vocab` output or a "
        "released BERT's (default: the shards manifest's); checked by sha256, read by "
        "--masking dynamic, recorded in checkpoints",
    )
    log_every: int = option(10, help="steps between metric lines", bounds=AT_LEAST_1)
    eval_every: int = option(500, help="0 = only at the end", bounds=ZERO_OR_MORE)
    eval_batches: int = option(
        100,
        help="held-out sequences evaluated: the first B × --micro-batch-size of the split, "
        "shared by the processes (the same ones on any number); 0 = the whole split",
        bounds=ZERO_OR_MORE,
    )
    checkpoint_every: int = option(
        1000, help="steps between checkpoints (and one at the end)", bounds=AT_LEAST_1
    )
    keep_checkpoints: int = option(3, help="newest checkpoints kept", bounds=AT_LEAST_1)
    resume: bool = option(
        False,
        help="continue from OUTPUT/checkpoints/latest; with no checkpoint there yet, start the "
        "run (from --init-checkpoint if given): one command line for every requeue",
    )
    overwrite: bool = option(
        False, help="start over in an OUTPUT that holds an earlier run (deletes only its files)"
    )
    init_checkpoint: str | None = option(
        None,
        help="start from these weights: a bertkit run (its directory, its checkpoints or a "
        "step-*.pt: phase 2), a transformers "
        "BERT directory or Google's TF checkpoint directory; with --resume, only until a "
        "checkpoint",
    )
    compile: bool = option(
        False, help="torch.compile the model (pads to max_seq_length, or its quarters if bucketed)"
    )
    unpad: str = option(
        "auto",
        choices=UNPAD_MODES,
        help="run the encoder on the real tokens only, padding left out of every matmul: auto "
        "(the default: where a GPU runs torch's variable-length attention, in bf16/fp16 with "
        "--attention-dropout 0 or in evaluation, and at least 8%% of the batch is padding; "
        "the padded batch elsewhere), on (always; with --compile the token count a dynamic "
        "shape), or off (the padded batch)",
    )
    ffn_epilogue: str = option(
        "auto",
        choices=KERNEL_MODES,
        help="each layer's feed-forward block with its bias and GELU in the matmul's epilogue "
        "(Triton kernels that round as the plain block does): auto (the default: on a GPU "
        "under bf16/fp16 without --fp8, where timing both blocks at the start finds the "
        "kernels faster), on, or off",
    )
    add_norm: str = option(
        "auto",
        choices=KERNEL_MODES,
        help="each layer's dropout, residual add and LayerNorm in one kernel each way (Triton; "
        "the dropout mask drawn again in backward): auto (the default: on a GPU, where timing "
        "both at the start finds the kernels faster), on, or off",
    )
    compile_mode: str | None = option(
        None,
        choices=COMPILE_MODES,
        help="torch.compile's mode, with --compile: default (when not given), reduce-overhead "
        "(CUDA graphs), max-autotune (tunes the matmuls once, minutes for base, cached in "
        "OUTPUT/compile-cache; CUDA graphs too), max-autotune-no-cudagraphs",
    )
    precision: str = option(
        "auto",
        help="auto (on a GPU bf16 autocast, or fp16 where it has no bf16; fp32 on CPU), bf16, "
        "fp16 (autocast with dynamic loss scaling), fp32",
    )
    fp8: str = option(
        "off",
        choices=FP8_RECIPES,
        help="the encoder's matmuls in FP8 through torchao (the gpu extra), on a GPU of compute "
        "capability 8.9 or newer: off (the default: FP8 rounds), tensorwise (one scale per "
        "tensor) or rowwise (one per row)",
    )
    fp8_layers: str = option(
        "auto",
        choices=FP8_LAYERS,
        help="with --fp8: auto (the encoder Linears torchao's H100 tables show faster in FP8) "
        "or all (every encoder Linear whose dimensions are multiples of 16)",
    )
    device: str = option("auto", help="auto, cuda, cpu")
    peak_tflops: float | None = option(
        None, help="the device's peak, for MFU where it is not known", bounds=POSITIVE
    )
    tensorboard: bool = option(True, help="write TensorBoard event files into the run directory")

    def __post_init__(self) -> None:
        # A config built in code (the demo, tests, a checkpoint's record from before mixes)
        # may name one source as a string: the same run as a one-item tuple.
        if isinstance(self.shards, str):
            object.__setattr__(self, "shards", (self.shards,))
        if self.mix is not None and not isinstance(self.mix, tuple):
            object.__setattr__(self, "mix", tuple(self.mix))

    @property
    def weights(self) -> tuple[float, ...]:
        """Each source's share of a global batch, normalised to sum to 1 (one source: 1)."""
        if self.mix is None:
            return (1.0,) * len(self.shards)
        top = max(self.mix)  # weights near the float's largest would sum to inf
        total = math.fsum(weight / top for weight in self.mix)
        return tuple(weight / top / total for weight in self.mix)

    def record(self) -> dict[str, Any]:
        """The config as a checkpoint records it: its fields, with one source's --shards a
        string as before mixes (what readers of a checkpoint's train_config expect)."""
        values = asdict(self)
        if len(self.shards) == 1:
            values["shards"] = self.shards[0]
        return values

    def validate(self) -> None:
        """Stop before any work (nothing read, no directory made) on flags that mean nothing:
        each field's bounds, choices and finite floats (as parsing checks them, for a config
        built in code), then the names and the flags that must agree with each other."""
        problem = config_problem(self)
        if problem:
            raise ValueError(problem)
        if self.model is not None and self.model not in MODEL_SIZES:
            raise ValueError(f"--model {self.model!r}: one of {', '.join(MODEL_SIZES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"--optimizer {self.optimizer!r}: one of {', '.join(OPTIMIZERS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"--precision {self.precision!r}: one of {', '.join(PRECISIONS)}")
        if self.compile_mode is not None and not self.compile:
            raise ValueError(
                f"--compile-mode {self.compile_mode} applies to --compile: add --compile, or "
                "leave --compile-mode out"
            )
        if self.fp8_layers != "auto" and self.fp8 == "off":
            raise ValueError(
                f"--fp8-layers {self.fp8_layers} chooses --fp8's layers: add --fp8 tensorwise "
                "or rowwise, or leave --fp8-layers out"
            )
        if self.fp8 != "off" and self.precision == "fp16":
            raise ValueError(FP8_NOT_FP16.format(recipe=self.fp8))
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"--device {self.device!r}: one of auto, cuda, cpu")
        dropout_problem = _dropout_problem(self)
        if dropout_problem:
            raise ValueError(dropout_problem)
        if self.resume and self.overwrite:
            raise ValueError(
                "--resume continues the run in --output, --overwrite replaces it: give one"
            )
        mix_problem = _mix_problem(self.shards, self.mix)
        if mix_problem:
            raise ValueError(mix_problem)
        if len(self.shards) > 1 and self.bucket_window:
            raise ValueError(
                f"--bucket-window {self.bucket_window}: a mix (several --shards) is not "
                "batched by length (its sources' windows are read apart); leave it out"
            )
        mask_replace_shares(self.mask_replace)  # raises ValueError naming the flag
        if self.masking == "static" and (flag := dynamic_only_flag(self)):
            raise ValueError(f"{flag} applies to --masking dynamic, not static")
        if self.warmup_steps is not None and self.warmup_steps > self.max_steps:
            raise ValueError(
                f"--warmup-steps {self.warmup_steps} exceeds --max-steps {self.max_steps}: the "
                f"run would end before its learning rate reaches --lr {self.lr:g} (step 1 "
                "trains at 0); lower it, or leave it out (the default is a tenth of "
                "--max-steps, at most 100)"
            )
        check_run_location("--output", self.output, remote_ok=True)
        check_run_location("--init-checkpoint", self.init_checkpoint, remote_ok=True)

    def resolved(self, resumed: Mapping[str, Any] | None = None) -> TrainConfig:
        """The config as the run uses it (and its checkpoints record it): the defaults that
        follow other flags filled in. --warmup-steps, not given, is a tenth of --max-steps,
        at most 100; on a resume (`resumed`: the checkpoint's config) with the checkpoint's
        --max-steps, the checkpoint's warmup, so that a requeue with the same flags goes on
        exactly, whatever default its run started with."""
        if self.warmup_steps is not None:
            return self
        if resumed is not None and resumed.get("max_steps") == self.max_steps:
            saved = resumed.get("warmup_steps")
            if isinstance(saved, int):
                return replace(self, warmup_steps=saved)
        return replace(self, warmup_steps=default_warmup_steps(self.max_steps))


# The dropout flags' fields, and the model config's fields they set (trainer/model.py
# BertConfig, as transformers names them).
DROPOUT_FIELDS = {
    "hidden_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
}


def _dropout_problem(config: TrainConfig) -> str | None:
    """One line where --dropout (both rates) is given with --hidden-dropout or
    --attention-dropout, or None."""
    apart = [
        f"{flag_name(name)} {value:g}"
        for name in DROPOUT_FIELDS
        if (value := getattr(config, name)) is not None
    ]
    if config.dropout is None or not apart:
        return None
    return (
        f"--dropout {config.dropout:g} sets --hidden-dropout and --attention-dropout both, "
        f"and {' and '.join(apart)} is given too: give --dropout alone, or the two apart"
    )


def dropout_overrides(config: TrainConfig) -> dict[str, float]:
    """The model config's dropout fields the flags set (--dropout both; --hidden-dropout,
    --attention-dropout each): a field no flag sets keeps the model's own value."""
    rates = {
        field: getattr(config, name) if config.dropout is None else config.dropout
        for name, field in DROPOUT_FIELDS.items()
    }
    return {field: rate for field, rate in rates.items() if rate is not None}


# The smallest share of the largest a --mix weight may have: the mix's order counts each
# source's share of a global batch in 64-bit fixed point, and a billionth is already noise.
MIX_RESOLUTION = 1e-9


def _source_place(spec: str) -> str:
    """A --shards source's place: its directory's, where it is given by its manifest."""
    return same_place_key(spec.removesuffix(f"/{SHARDS_MANIFEST_NAME}"))


def _mix_problem(shards: tuple[str, ...], mix: tuple[float, ...] | None) -> str | None:
    """One line on --shards and --mix that do not go together, or None: several sources
    need --mix (no proportion is guessed: by size, the largest corpus would drown the
    domain one), one weight each; one source takes none; no source twice."""
    if not shards:
        return "--shards: give a shards directory"
    repeated = repeated_place(shards, "--shards", "source", _source_place)
    if repeated:
        return f"{repeated}: name each source once"
    if mix is None:
        if len(shards) > 1:
            even = ",".join(["0.5"] * 2) if len(shards) == 2 else ",".join(["1"] * len(shards))
            return (
                f"--shards names {len(shards)} sources: give --mix, one weight each in "
                f"--shards order (e.g. --mix {even})"
            )
        return None
    shown = ",".join(f"{weight:g}" for weight in mix)
    if len(shards) == 1:
        return f"--mix {shown}: --mix weighs several --shards sources; with one, leave it out"
    if len(mix) != len(shards):
        return (
            f"--mix {shown}: {len(mix)} weight{'s' if len(mix) > 1 else ''} for "
            f"{len(shards)} --shards sources; give "
            "one weight each, in --shards order"
        )
    if min(mix) / max(mix) < MIX_RESOLUTION:
        return (
            f"--mix {shown}: a weight under {MIX_RESOLUTION:g} of the largest draws that source "
            "next to never (once in a billion samples); raise it, or leave the source out"
        )
    return None


def default_warmup_steps(max_steps: int) -> int:
    """--warmup-steps when not given: a tenth of the run (rounded down), at most 100.

    A fixed 100 would refuse every run under 100 steps; a tenth keeps short runs' warmup in
    proportion (none under 10 steps, so a smoke test's steps all move the weights)."""
    return min(100, max_steps // 10)


def accumulation_steps(config: TrainConfig, world_size: int) -> int:
    """Micro-batches per optimizer step on each rank."""
    per_pass = config.micro_batch_size * world_size
    if config.global_batch_size is None:
        return 1
    if config.global_batch_size % per_pass:
        raise ValueError(
            f"--global-batch-size {config.global_batch_size} is not a multiple of "
            f"--micro-batch-size × processes = {per_pass}"
        )
    return config.global_batch_size // per_pass


# The flags that shape dynamic masks, and their defaults: refused with --masking static.
_DYNAMIC_ONLY = {
    "mask_rate": 0.15,
    "mask_replace": "80/10/10",
    "whole_word_mask": False,
    "max_predictions": None,
}


def dynamic_only_flag(config: TrainConfig) -> str | None:
    """The first flag that shapes dynamic masks and is not at its default, or None."""
    for name, default in _DYNAMIC_ONLY.items():
        if getattr(config, name) != default:
            return "--" + name.replace("_", "-")
    return None


def mask_replace_shares(text: str) -> tuple[float, float, float]:
    """ "80/10/10" → (0.8, 0.1, 0.1): the shares of predicted tokens replaced by [MASK], kept
    and replaced by a random token; ValueError unless three whole percents adding up to 100."""
    parts = str(text).split("/")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != 3 or min(values) < 0 or sum(values) != 100:
        raise ValueError(
            f"--mask-replace {text!r}: three whole percents for [MASK]/kept/random adding up "
            "to 100, e.g. 80/10/10 or 100/0/0"
        )
    return values[0] / 100, values[1] / 100, values[2] / 100


# A value that starts with a minus and then a number: -1,2 (a --mix), -1e-4, -.5, -inf.
_MINUS_VALUE = re.compile(r"-(\.?\d|(inf|infinity|nan)$)", re.IGNORECASE)


def negative_values_joined(argv: list[str]) -> list[str]:
    """`--mix -1,2` as `--mix=-1,2`: argparse reads a word that starts with `-` as a flag
    unless it is a plain negative number (-1, -0.5), and refuses `--mix -1,2` or `--lr -1e-4`
    with "expected one argument", where the value's own check says what is wrong with it
    ("--mix -1,2: -1 must be more than 0"). No flag of bertkit train starts with `-` and a
    number, so such a word after a flag is that flag's value."""
    joined: list[str] = []
    for arg in argv:
        before = joined[-1] if joined else ""
        flag = before.startswith("--") and before != "--" and "=" not in before
        if flag and _MINUS_VALUE.match(arg):
            joined[-1] = f"{before}={arg}"
        else:
            joined.append(arg)
    return joined


def parse_arguments(argv: list[str] | None) -> TrainConfig:
    """TrainConfig's flags (pipelines.command): `--micro-batch-size` for `micro_batch_size`."""
    args = negative_values_joined(sys.argv[1:] if argv is None else argv)
    return parse_config(TrainConfig, args, "bertkit train", __doc__)
