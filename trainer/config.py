"""`bertkit train`'s flags: `TrainConfig`, one field per flag, checked by `validate()`.

The checkpoint stores it resolved (schemas/checkpoint.py); `accumulation_steps` turns the
batch flags into micro-batches per optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.io.flags import option
from trainer.checkpoint import check_run_location
from trainer.model import MODEL_SIZES
from trainer.optim import OPTIMIZERS


@dataclass(frozen=True)
class TrainConfig:
    """Every flag of `bertkit train`; the checkpoint stores it resolved."""

    shards: str = option(help="shards directory, its manifest.json, or a shard URL pattern")
    output: str = option(help="run directory: checkpoints/, metrics.jsonl, TensorBoard events")
    model: str = option("base", help="tiny, mini, small, medium, base, large")
    max_seq_length: int | None = option(None, help="which seqN shards (required if several)")
    micro_batch_size: int = option(32, help="sequences per process per forward pass")
    global_batch_size: int | None = option(
        None, help="sequences per optimizer step (default micro × ranks)"
    )
    max_steps: int = option(1000, help="optimizer steps; the schedule decays to 0 here")
    stop_at_step: int | None = option(
        None, help="stop early (a job's time slice); --resume goes on"
    )
    optimizer: str = option("adamw", help="adamw or lamb")
    lr: float = option(1e-4, help="peak learning rate")
    weight_decay: float = option(0.01, help="AdamW/LAMB weight decay (not on biases and LayerNorm)")
    beta1: float = option(0.9, help="first-moment decay")
    beta2: float = option(0.999, help="second-moment decay")
    eps: float = option(1e-6, help="optimizer epsilon")
    warmup_steps: int = option(100, help="linear warmup steps")
    decay_power: float = option(1.0, help="1 = linear decay (BERT), 0.5 = NVIDIA's LAMB recipe")
    clip_grad_norm: float = option(1.0, help="0 turns clipping off")
    dropout: float | None = option(
        None, help="hidden and attention dropout (default: the model's 0.1)"
    )
    seed: int = option(12345, help="seeds the data order, dropout and initialisation")
    num_workers: int = option(2, help="loader processes per rank")
    shuffle_buffer: int = option(10_000, help="samples in each loader worker's shuffle buffer")
    bucket_window: int = option(
        0, help="batch by length: sort each W micro-batches' samples by length (0 = off)"
    )
    log_every: int = option(10, help="steps between metric lines")
    eval_every: int = option(500, help="0 = only at the end")
    eval_batches: int = option(
        100, help="per rank, of --micro-batch-size; 0 = the whole held-out split"
    )
    checkpoint_every: int = option(1000, help="steps between checkpoints (and one at the end)")
    keep_checkpoints: int = option(3, help="newest checkpoints kept")
    resume: bool = option(
        False,
        help="continue from OUTPUT/checkpoints/latest; with no checkpoint there yet, start the "
        "run (from --init-checkpoint if given): one command line for every requeue",
    )
    overwrite: bool = option(
        False, help="start over in an OUTPUT that holds an earlier run (deletes only its files)"
    )
    init_checkpoint: str | None = option(
        None, help="start from these weights (phase 2); with --resume, only until a checkpoint"
    )
    compile: bool = option(
        False, help="torch.compile the model (pads to max_seq_length, or its quarters if bucketed)"
    )
    precision: str = option("auto", help="auto (bf16 autocast on CUDA, fp32 on CPU), bf16, fp32")
    device: str = option("auto", help="auto, cuda, cpu")
    peak_tflops: float | None = option(
        None, help="the device's peak, for MFU where it is not known"
    )
    tensorboard: bool = option(True, help="write TensorBoard event files into the run directory")

    def validate(self) -> None:
        if self.model not in MODEL_SIZES:
            raise ValueError(f"--model {self.model!r}: one of {', '.join(MODEL_SIZES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"--optimizer {self.optimizer!r}: one of {', '.join(OPTIMIZERS)}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError("--precision: auto, bf16 or fp32")
        if self.resume and self.overwrite:
            raise ValueError(
                "--resume continues the run in --output, --overwrite replaces it: give one"
            )
        for name in ("micro_batch_size", "max_steps", "log_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if self.warmup_steps > self.max_steps:
            raise ValueError("--warmup-steps must not exceed --max-steps")
        if self.bucket_window < 0:
            raise ValueError("--bucket-window must be 0 (off) or a number of micro-batches")
        check_run_location("--output", self.output, remote_ok=True)
        check_run_location("--init-checkpoint", self.init_checkpoint, remote_ok=True)


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
