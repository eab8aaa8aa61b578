"""`bertkit train`: BERT pre-training (MLM + NSP) on bertkit shards, one process or many.

    bertkit train --shards out/demo/shards --output out/run --model tiny \\
        --micro-batch-size 32 --max-steps 600 --lr 1e-3 --warmup-steps 60

    torchrun --nnodes 4 --nproc-per-node 8 --rdzv-endpoint HOST:29400 -m trainer.train \\
        --shards s3://bucket/shards --output /ckpt/run --model base \\
        --micro-batch-size 128 --global-batch-size 8192 --optimizer lamb --lr 6e-3 \\
        --warmup-steps 2000 --max-steps 7038 --decay-power 0.5 --compile

    # phase 2: the seq-512 shards, starting from phase 1's weights
    bertkit train --shards s3://bucket/shards --max-seq-length 512 --output /ckpt/run512 \\
        --init-checkpoint /ckpt/run/checkpoints --model base ...

Shards are streamed (trainer/data.py), never downloaded first. The loop, top to bottom:
micro-batches are accumulated to the global batch (DDP syncs gradients on the last one only),
gradients are clipped, the optimizer and the warmup/decay schedule step. Every --log-every
steps the metrics go to OUTPUT/metrics.jsonl, TensorBoard (event files in OUTPUT) and the
progress line; every --eval-every steps the held-out split is evaluated; every
--checkpoint-every steps (and at the end) OUTPUT/checkpoints/step-NNNNNNNN.pt is written.

`--resume` continues from OUTPUT/checkpoints/latest exactly: weights, optimizer, schedule,
every rank's RNG and the input position, so the losses are those of an uninterrupted run
(tests/test_train.py). It needs the same world size, workers and batch sizes.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
import time
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from schemas.batch import MODEL_INPUTS, BatchField
from schemas.checkpoint import CHECKPOINT_FORMAT, CheckpointKey
from trainer import distributed
from trainer.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
)
from trainer.data import (
    DataConfigError,
    DataPosition,
    DataSource,
    LoaderConfig,
    PretrainingLoader,
    check_source,
    open_source,
)
from trainer.evaluate import EvalResult, evaluate
from trainer.metrics import MetricsLogger, ProgressLine, ThroughputMeter, peak_flops
from trainer.model import MODEL_SIZES, BertConfig, BertForPreTraining, config_for
from trainer.model import flops_per_sequence as model_flops
from trainer.optim import OPTIMIZERS, build_optimizer, warmup_decay_schedule

_LOG = logging.getLogger("bertkit.train")


@dataclass(frozen=True)
class TrainConfig:
    """Every flag of `bertkit train`; the checkpoint stores it resolved."""

    shards: str  # shards directory, its manifest.json, or a shard URL pattern
    output: str  # run directory: checkpoints/, metrics.jsonl, TensorBoard events
    model: str = "base"  # tiny, mini, small, medium, base, large
    max_seq_length: int | None = None  # which seqN shards (required if several)
    micro_batch_size: int = 32  # sequences per process per forward pass
    global_batch_size: int | None = None  # sequences per optimizer step (default micro × ranks)
    max_steps: int = 1000  # optimizer steps; the schedule decays to 0 here
    stop_at_step: int | None = None  # stop early (a job's time slice); --resume goes on
    optimizer: str = "adamw"  # adamw or lamb
    lr: float = 1e-4
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    warmup_steps: int = 100
    decay_power: float = 1.0  # 1 = linear decay (BERT), 0.5 = NVIDIA's LAMB recipe
    clip_grad_norm: float = 1.0  # 0 turns clipping off
    dropout: float | None = None  # hidden and attention dropout (default: the model's 0.1)
    seed: int = 12345
    num_workers: int = 2  # loader processes per rank
    shuffle_buffer: int = 10_000
    log_every: int = 10
    eval_every: int = 500  # 0 = only at the end
    eval_batches: int = 100  # per rank, of --micro-batch-size; 0 = the whole held-out split
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    resume: bool = False  # continue from OUTPUT/checkpoints/latest
    init_checkpoint: str | None = None  # start from these weights (phase 2)
    compile: bool = False  # torch.compile the model (pads batches to max_seq_length)
    precision: str = "auto"  # auto (bf16 autocast on CUDA, fp32 on CPU), bf16, fp32
    device: str = "auto"  # auto, cuda, cpu
    peak_tflops: float | None = None  # the device's peak, for MFU where it is not known
    tensorboard: bool = True

    def validate(self) -> None:
        if self.model not in MODEL_SIZES:
            raise ValueError(f"--model {self.model!r}: one of {', '.join(MODEL_SIZES)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"--optimizer {self.optimizer!r}: one of {', '.join(OPTIMIZERS)}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError("--precision: auto, bf16 or fp32")
        if self.resume and self.init_checkpoint:
            raise ValueError(
                "--resume continues this run; --init-checkpoint starts a new one from other "
                "weights: give one"
            )
        for name in ("micro_batch_size", "max_steps", "log_every", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if self.warmup_steps > self.max_steps:
            raise ValueError("--warmup-steps must not exceed --max-steps")


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


# --------------------------------------------------------------------------- set-up


def _model_config(config: TrainConfig, vocab_size: int, init: dict[str, Any] | None) -> BertConfig:
    overrides: dict[str, float] = {}
    if config.dropout is not None:
        overrides = {
            "hidden_dropout_prob": config.dropout,
            "attention_probs_dropout_prob": config.dropout,
        }
    if init is not None:  # phase 2 and resume: the architecture is the checkpoint's
        return BertConfig(**{**init, **overrides})
    return config_for(config.model, vocab_size, **overrides)


def _vocab_size(source: DataSource) -> int:
    if source.manifest is None:
        raise DataConfigError(
            f"{source.shards[0].url}: no manifest.json found three levels up; the trainer "
            "takes the vocabulary's size and sha256 from it. Give the shards directory, or "
            "keep manifest.json where `bertkit examples` wrote it"
        )
    return int(source.manifest.vocab["size"])


def _rng_state(env: distributed.Distributed) -> dict[str, Any]:
    """Every rank's generator states (dropout draws differ per rank), gathered on all."""
    cpu = distributed.gather_tensors(env, torch.get_rng_state())
    cuda = None
    if env.device.type == "cuda":
        cuda = distributed.gather_tensors(env, torch.cuda.get_rng_state(env.device))
    return {"torch": cpu, "cuda": cuda}


def _restore_rng(env: distributed.Distributed, state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"][env.rank])
    if env.device.type == "cuda" and state.get("cuda"):
        torch.cuda.set_rng_state(state["cuda"][env.rank], env.device)


def _check_resumable(checkpoint: dict[str, Any], config: TrainConfig, world: int) -> None:
    saved = checkpoint[CheckpointKey.TRAIN_CONFIG]
    problems = []
    if checkpoint[CheckpointKey.WORLD_SIZE] != world:
        problems.append(f"{checkpoint[CheckpointKey.WORLD_SIZE]} processes, now {world}")
    for name in ("num_workers", "micro_batch_size", "global_batch_size", "seed", "shards",
                 "max_seq_length", "shuffle_buffer"):  # fmt: skip
        if saved.get(name) != getattr(config, name):
            flag = "--" + name.replace("_", "-")
            problems.append(f"{flag} {saved.get(name)}, now {getattr(config, name)}")
    if problems:
        raise ValueError(
            "--resume continues exactly only with the input set-up the run started with: "
            + "; ".join(problems)
            + ". Use the original flags, or start a new run with --init-checkpoint"
        )


def _autocast(config: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager:
    bf16 = config.precision == "bf16" or (config.precision == "auto" and device.type == "cuda")
    if bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def batch_flops(model_config: BertConfig, batch: dict[str, torch.Tensor]) -> float:
    """Training FLOPs of one micro-batch as collated: padded length, its real predictions."""
    sequences, length = batch[BatchField.INPUT_IDS].shape
    predictions = int((batch[BatchField.MASKED_LABELS] >= 0).sum())
    encoder = model_flops(model_config, length, 0)
    head = model_flops(model_config, length, 1) - encoder  # one prediction's MLM head
    return sequences * encoder + predictions * head


# --------------------------------------------------------------------------- the run


def train(config: TrainConfig) -> dict[str, Any]:
    """Run training; returns the last step's metrics and the last evaluation (rank 0)."""
    config.validate()
    env = distributed.setup(config.device)
    try:
        return _train(config, env)
    finally:
        distributed.teardown(env)


def _train(config: TrainConfig, env: distributed.Distributed) -> dict[str, Any]:
    output = Path(config.output)
    checkpoints = output / "checkpoints"
    accumulation = accumulation_steps(config, env.world_size)
    torch.manual_seed(config.seed + env.rank)  # dropout differs per rank, reproducibly
    if env.device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # Leave the loader workers their cores: with torch's default (every core) and a
        # worker beside it, a tiny model's step was 9× slower on 2 cores (OpenMP threads
        # spin-wait on each other while a worker holds one).
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - config.num_workers))

    # The data, checked against the model before any step runs.
    source = open_source(config.shards, "train", config.max_seq_length)
    heldout = _heldout_source(config, source)
    vocab_size = _vocab_size(source)

    resumed: dict[str, Any] | None = None
    init: dict[str, Any] | None = None
    if config.resume:
        path = latest_checkpoint(checkpoints)
        if path is None:
            raise ValueError(f"--resume: no checkpoint in {checkpoints} yet; drop --resume")
        resumed = load_checkpoint(path)
        _check_resumable(resumed, config, env.world_size)
        init = resumed
    elif config.init_checkpoint:
        init = load_checkpoint(resolve_checkpoint(config.init_checkpoint))
    if init is not None and init[CheckpointKey.TRAIN_CONFIG].get("model") != config.model:
        raise ValueError(
            f"the checkpoint holds a {init[CheckpointKey.TRAIN_CONFIG].get('model')} model, "
            f"--model is {config.model}: pass --model "
            f"{init[CheckpointKey.TRAIN_CONFIG].get('model')}"
        )
    model_config = _model_config(
        config, vocab_size, init[CheckpointKey.MODEL_CONFIG] if init else None
    )
    vocab_sha = init[CheckpointKey.VOCAB].get("sha256") if init else None
    check_source(source, model_config.max_position_embeddings, model_config.vocab_size, vocab_sha)

    model = BertForPreTraining(model_config).to(env.device)
    if init is not None:
        model.load_state_dict(init[CheckpointKey.MODEL])
    optimizer = build_optimizer(
        model, config.optimizer, config.lr, config.weight_decay, (config.beta1, config.beta2),
        config.eps, fused=env.device.type == "cuda" and config.optimizer == "adamw",
    )  # fmt: skip
    scheduler = warmup_decay_schedule(
        optimizer, config.warmup_steps, config.max_steps, config.decay_power
    )
    step, position = 0, DataPosition()
    if resumed is not None:
        optimizer.load_state_dict(resumed[CheckpointKey.OPTIMIZER])
        scheduler.load_state_dict(resumed[CheckpointKey.SCHEDULER])
        step = resumed[CheckpointKey.STEP]
        position = DataPosition.from_dict(resumed[CheckpointKey.DATA_POSITION])
        _restore_rng(env, resumed[CheckpointKey.RNG])

    wrapped: torch.nn.Module = model
    if env.active:
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=device_ids)
    forward = torch.compile(wrapped) if config.compile else wrapped
    autocast = _autocast(config, env.device)

    loader = PretrainingLoader(
        source,
        LoaderConfig(
            config.micro_batch_size, rank=env.rank, world_size=env.world_size,
            num_workers=config.num_workers, seed=config.seed,
            shuffle_buffer=config.shuffle_buffer, pin_memory=env.device.type == "cuda",
        ),
    )  # fmt: skip
    batches = loader.batches(position)
    pad_to = source.max_seq_length if config.compile else None

    logger = MetricsLogger(
        output, enabled=env.is_main, tensorboard=config.tensorboard, purge_step=step + 1
    )
    progress = ProgressLine(config.max_steps, every=config.log_every, enabled=env.is_main)
    dtype = "bf16" if isinstance(autocast, torch.autocast) else "fp32"
    meter = ThroughputMeter(peak_flops(env.device, dtype, config.peak_tflops))
    if env.is_main:
        _LOG.info(
            "%s: %s, %d parameters; %d train samples, %d batches/epoch/rank; %d processes × "
            "%d micro-batches of %d = %d sequences per step",
            config.output, config.model, sum(p.numel() for p in model.parameters()),
            source.samples, loader.batches_per_epoch, env.world_size, accumulation,
            config.micro_batch_size, config.micro_batch_size * accumulation * env.world_size,
        )  # fmt: skip

    model.train()
    last_train: dict[str, Any] = {}
    last_eval: EvalResult | None = None
    stop = min(config.max_steps, config.stop_at_step or config.max_steps)
    # loss, mlm loss, nsp loss, mlm correct, predictions, nsp correct, sequences, micro-batches,
    # summed on the device: reading them every step would make the GPU wait for the CPU.
    sums = torch.zeros(8, dtype=torch.float64, device=env.device)
    one = torch.ones((), dtype=torch.float64, device=env.device)
    while step < stop:
        for micro in range(accumulation):
            host_batch = next(batches)
            # Counted on the host copy: the same sums on the device would stall the GPU.
            meter.update(
                len(host_batch[BatchField.INPUT_IDS]),
                int(host_batch[BatchField.ATTENTION_MASK].sum()),
                batch_flops(model_config, host_batch) * env.world_size,
            )
            batch = to_device(host_batch, env.device, pad_to)
            sync = micro == accumulation - 1 or not env.active
            with (contextlib.nullcontext() if sync else wrapped.no_sync()), autocast:
                out = forward(**{name: batch[name] for name in MODEL_INPUTS})
            (out.loss / accumulation).backward()
            sequences = one * len(batch[BatchField.NEXT_SENTENCE_LABELS])
            parts = (out.loss, out.mlm_loss, out.nsp_loss, out.mlm_correct, out.mlm_count,
                     out.nsp_correct, sequences, one)  # fmt: skip
            sums += torch.stack([part.detach().to(torch.float64) for part in parts])
        grad_norm = (
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad_norm)
            if config.clip_grad_norm > 0
            else None
        )
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1

        if step % config.log_every == 0 or step == stop:
            if env.device.type == "cuda":
                torch.cuda.synchronize(env.device)
            total = distributed.all_reduce_sum(env, sums.clone())
            loss, mlm, nsp, correct, preds, nsp_ok, seqs, micros = total.tolist()
            last_train = {
                "loss": loss / micros, "mlm_loss": mlm / micros, "nsp_loss": nsp / micros,
                "mlm_accuracy": correct / max(preds, 1), "nsp_accuracy": nsp_ok / max(seqs, 1),
                "lr": scheduler.get_last_lr()[0],
                "grad_norm": float(grad_norm) if grad_norm is not None else None,
                "epoch": loader.position.epoch, **meter.lap(),
            }  # fmt: skip
            logger.log(step, "train", last_train)
            progress.update(step, {"loss": last_train["loss"], "seq/s": last_train["seq_per_s"]})
            sums.zero_()

        if heldout is not None and (
            step == stop or (config.eval_every and step % config.eval_every == 0)
        ):
            last_eval = evaluate(
                model, heldout, env, config.micro_batch_size,
                config.eval_batches or None, autocast if dtype == "bf16" else None,  # type: ignore[arg-type]
            )  # fmt: skip
            logger.log(step, "eval", last_eval.as_dict())
            if env.is_main:
                _LOG.info(
                    "step %d held-out: MLM loss %.3f, MLM accuracy %.3f, NSP accuracy %.3f",
                    step, last_eval.mlm_loss, last_eval.mlm_accuracy, last_eval.nsp_accuracy,
                )  # fmt: skip
            meter.lap()  # evaluation time is not training throughput

        if step % config.checkpoint_every == 0 or step == stop:
            rng = _rng_state(env)  # a collective: every rank takes part
            if env.is_main:
                path = save_checkpoint(
                    checkpoints, step,
                    _checkpoint_payload(config, env, model, optimizer, scheduler, step,
                                        loader.position, rng, source),
                    config.keep_checkpoints,
                )  # fmt: skip
                _LOG.info("step %d: wrote %s", step, path)
            distributed.barrier(env)
    progress.close()
    logger.close()
    return {"step": step, "train": last_train, "eval": last_eval.as_dict() if last_eval else None}


def _heldout_source(config: TrainConfig, source: DataSource) -> DataSource | None:
    if source.manifest_url is None or source.manifest is None:
        _LOG.warning("no manifest, so no held-out split: evaluation is off")
        return None
    output = source.manifest.outputs.get(f"seq{source.max_seq_length}")
    if output is None or not output.splits.get("heldout") or not output.splits["heldout"].shards:
        _LOG.warning("%s: no held-out shards; evaluation is off", source.manifest_url)
        return None
    return open_source(source.manifest_url, "heldout", source.max_seq_length)


def to_device(
    batch: dict[str, torch.Tensor], device: torch.device, pad_to: int | None
) -> dict[str, torch.Tensor]:
    if pad_to is not None:  # torch.compile: one shape, so one graph
        length = batch[BatchField.INPUT_IDS].shape[1]
        if length < pad_to:
            padded = (BatchField.INPUT_IDS, BatchField.TOKEN_TYPE_IDS, BatchField.ATTENTION_MASK)
            for name in padded:
                batch[name] = torch.nn.functional.pad(batch[name], (0, pad_to - length))
    return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}


def _checkpoint_payload(
    config: TrainConfig, env: distributed.Distributed, model: BertForPreTraining,
    optimizer: torch.optim.Optimizer, scheduler: Any, step: int, position: DataPosition,
    rng: dict[str, Any], source: DataSource,
) -> dict[str, Any]:  # fmt: skip
    assert source.manifest is not None
    return {
        CheckpointKey.FORMAT: CHECKPOINT_FORMAT,
        CheckpointKey.STEP: step,
        CheckpointKey.MODEL_CONFIG: asdict(model.config),
        CheckpointKey.MODEL: model.state_dict(),
        CheckpointKey.OPTIMIZER: optimizer.state_dict(),
        CheckpointKey.SCHEDULER: scheduler.state_dict(),
        CheckpointKey.DATA_POSITION: position.to_dict(),
        CheckpointKey.RNG: rng,
        CheckpointKey.TRAIN_CONFIG: asdict(config),
        CheckpointKey.DATA: {
            "manifest": source.manifest_url,
            "schema_version": source.manifest.schema_version,
            "max_seq_length": source.max_seq_length,
            "samples_per_epoch": source.samples,
        },
        CheckpointKey.VOCAB: dict(source.manifest.vocab),
        CheckpointKey.WORLD_SIZE: env.world_size,
        CheckpointKey.NUM_WORKERS: config.num_workers,
    }


# --------------------------------------------------------------------------- command line


def parse_arguments(argv: list[str] | None) -> TrainConfig:
    """Flags from TrainConfig's fields: `--micro-batch-size` for `micro_batch_size`."""
    parser = argparse.ArgumentParser(
        prog="bertkit train", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    for spec in fields(TrainConfig):
        flag = "--" + spec.name.replace("_", "-")
        required = spec.default is MISSING
        default = None if required else spec.default
        kind = str(spec.type)
        if kind == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
            continue
        convert = float if "float" in kind else int if "int" in kind else str
        parser.add_argument(flag, type=convert, default=default, required=required)
    args = parser.parse_args(argv)
    return TrainConfig(**vars(args))


def run(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    config = parse_arguments(argv)
    started = time.monotonic()
    try:
        result = train(config)
    except (ValueError, FileNotFoundError, OSError) as error:  # Data/CheckpointError too
        print(f"bertkit train: error: {error}", file=sys.stderr)
        return 2
    if int(os.environ.get("RANK", "0")) == 0:
        minutes = (time.monotonic() - started) / 60
        print(f"trained {result['step']} steps in {minutes:.1f} min → {config.output}")
        if result["eval"]:
            e = result["eval"]
            print(f"held-out: MLM loss {e['mlm_loss']:.3f} (perplexity "
                  f"{math.exp(min(e['mlm_loss'], 50)):.1f}), MLM accuracy "
                  f"{e['mlm_accuracy']:.3f}, NSP accuracy {e['nsp_accuracy']:.3f}")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
