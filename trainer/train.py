"""`bertkit train`: the optimizer step, the training loop and the command that runs them.

What the command does, its flags and its exit codes are `bertkit train --help`, whose text is
trainer/config.py's (the flags load there without torch, so the help works in any install).
"""

# For code readers: this file reads top to bottom: `train_step`, one optimizer step;
# `train`/`_train`, the loop that logs, evaluates and checkpoints; the CLI. The Run it drives
# (model, DDP wrapper, optimizer, schedule, loader, meters, restored on --resume) is built by
# trainer/setup.py; the flags, TrainConfig, are in trainer/config.py. The stages of the input
# are in trainer/data.py, the recipe in trainer/recipe.py, the epoch's order (why any world
# size reads the same global batches) in trainer/order.py, dynamic masks in
# trainer/masking.py. DDP syncs gradients on the last micro-batch only. Rank 0 holds the run
# directory's lock (trainer/run/lock.py) from before it looks at the directory until it
# exits; the loader's worker processes end with the run, whatever ends it
# (trainer/workers.py). Exact resume: tests/test_train.py; elastic: tests/test_elastic.py (on
# another world size dropout is reseeded from seed, rank and step).

from __future__ import annotations

import sys

if __name__ == "__main__":
    # `python -m trainer.train` (torchrun's command): this module is imported again, with
    # `bertkit train`'s start (pipelines/command/startup.py), then run. Importing torch takes
    # seconds; a Ctrl-C or SIGTERM in them ends the process with one line and 130 or 143,
    # as it ends `bertkit train`, not with a traceback from inside an import. `main` exits,
    # so the rest of this copy never runs.
    from pipelines.command.startup import exit_quietly_on_broken_pipe, import_command

    with exit_quietly_on_broken_pipe():
        import_command("trainer.train", one_blas_thread=False).main()

import contextlib
import logging
import math
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch

from pipelines.io import storage
from pipelines.io.recorded_paths import record_path
from schemas.batch import BatchField
from schemas.checkpoint import CHECKPOINT_FORMAT, CheckpointKey
from trainer import distributed
from trainer.collate import to_device  # the trainer's compile padding
from trainer.config import TrainConfig, accumulation_steps, parse_arguments
from trainer.evaluate import (
    EvalResult,
    EvaluationStopped,
    MixEvalResult,
    evaluate,
    evaluate_sources,
)
from trainer.fp8 import cpu_products
from trainer.mix import drawn_per_source
from trainer.model import batch_flops
from trainer.optim import applied_lr
from trainer.preemption import PREEMPTED_EXIT_CODE, StopRequest, signal_name
from trainer.recipe import heldout_masking, heldout_shape
from trainer.run.checkpoints import save_checkpoint
from trainer.run.lock import RunLockLost
from trainer.setup import Run, setup

_LOG = logging.getLogger("bertkit.train")

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


# --------------------------------------------------------------------------- errors


class RunFailed(Exception):
    """An error after the first step began (exit 1); before it, one is a refusal (exit 2)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))


# --------------------------------------------------------------------------- one step


# What `train_step` adds up for a model with the NSP head, in order.
_STEP_SUMS = (
    "loss",
    "mlm_loss",
    "nsp_loss",
    "mlm_correct",
    "predictions",
    "nsp_correct",
    "sequences",
    "micro_batches",
)


def step_sums(nsp: bool) -> tuple[str, ...]:
    """What `train_step` adds up, in order; without the NSP head, no NSP sum at all."""
    return _STEP_SUMS if nsp else tuple(n for n in _STEP_SUMS if not n.startswith("nsp_"))


def train_step(run: Run, sums: torch.Tensor) -> torch.Tensor | None:
    """One optimizer step: the micro-batches (DDP syncs gradients on the last one only),
    clipping, the optimizer and the schedule; adds the step's losses and counts to `sums`
    (on the device, in `step_sums` order) and returns the gradient norm before clipping (None
    without clipping)."""
    env, model_config = run.env, run.model.config
    inputs = run.model.input_names  # no NSP label without the NSP head
    names = step_sums(model_config.nsp)
    one = torch.ones((), dtype=torch.float64, device=env.device)
    for micro in range(run.accumulation):
        host_batch = next(run.batches)
        # Counted on the host copy, through NumPy: the same sums on the device would stall
        # the GPU (tests/test_step_syncs.py holds the step to no reads of a tensor's value).
        lengths = np.count_nonzero(host_batch[BatchField.ATTENTION_MASK].numpy(), axis=1)
        run.meter.update(
            len(host_batch[BatchField.INPUT_IDS]),
            int(lengths.sum()),
            batch_flops(model_config, host_batch),
        )
        # The model's inputs only (the sample keys stay on the host); padded in the loader.
        batch = to_device({k: host_batch[k] for k in inputs}, env.device, run.pad_to)
        sync = micro == run.accumulation - 1 or not env.active
        with contextlib.nullcontext() if sync else run.wrapped.no_sync(), run.autocast:
            # --unpad: the real tokens' counts from the host, so the forward does not wait on
            # the device for them (nor auto, for whether the batch has padding enough).
            hints = run.model.unpad_hints(lengths, batch[BatchField.INPUT_IDS].numel(), env.device)
            out = run.forward(**batch, **hints)
        if run.scaler is None:
            (out.loss / run.accumulation).backward()
        else:  # fp16: the loss scaled up (trainer/precision.py); DDP syncs scaled gradients
            run.scaler.backward(out.loss / run.accumulation)
        parts = {
            "loss": out.loss,
            "mlm_loss": out.mlm_loss,
            "nsp_loss": out.nsp_loss,
            "mlm_correct": out.mlm_correct,
            "predictions": out.mlm_count,
            "nsp_correct": out.nsp_correct,
            "sequences": one * len(batch[BatchField.INPUT_IDS]),
            "micro_batches": one,
        }
        sums += torch.stack([parts[name].detach().to(torch.float64) for name in names])
    clip = run.config.clip_grad_norm
    if run.scaler is not None:  # the gradients back to their true size before clipping
        run.scaler.unscale(run.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), clip) if clip > 0 else None
    if run.scaler is None:
        run.optimizer.step()
        run.scheduler.step()
    else:  # skipped where a gradient overflowed; the schedule steps past it all the same
        run.scaler.step(run.optimizer, run.scheduler)
    run.optimizer.zero_grad(set_to_none=True)
    return grad_norm


# --------------------------------------------------------------------------- the loop


def train(config: TrainConfig) -> dict[str, Any]:
    """Run training; returns the last step's metrics and the last evaluation (rank 0)."""
    config.validate()
    # Installed first: the loader's worker processes inherit the handler, so a SIGTERM sent
    # to every process of the job (SLURM's scancel) does not kill them under the main one.
    with StopRequest() as stop_request:
        env = distributed.setup(config.device)
        try:
            try:
                with cpu_products(config.fp8, env.device):
                    result = _train(config, env, stop_request)
            except Exception as error:
                # Ctrl-C inside a library's write comes out as that library's error (torch.
                # save's zip writer: "unexpected pos"): still an interruption, exit 130.
                if stop_request.interrupted:
                    raise KeyboardInterrupt from error
                raise
            # Every rank done with the run (rank 0's last upload and the lock given back)
            # before any takes its process group down: a Gloo rank that destroyed its group
            # and exited while another still held theirs was seen to abort at exit
            # ("terminate called without an active exception").
            distributed.barrier(env)
            return result
        finally:
            distributed.teardown(env)


def _train(
    config: TrainConfig, env: distributed.Distributed, stop_request: StopRequest
) -> dict[str, Any]:
    """Set-up, then the loop: steps, metrics, held-out evaluation, checkpoints; a stop
    signal (trainer/preemption.py) ends it after the step, with a checkpoint there."""
    run = setup(config, env)
    try:
        return _loop(run, stop_request)
    except (ValueError, OSError) as error:  # a shard, a sample, a checkpoint write
        raise RunFailed(error) from error
    finally:
        run.loader.close()  # its worker processes, whatever ended the loop
        run.directory.close()  # its staging directory removed, its lock given back


def _loop(run: Run, stop_request: StopRequest) -> dict[str, Any]:
    config, env = run.config, run.env
    preempted: int | None = None
    last_train: dict[str, Any] = {}
    last_eval: EvalResult | MixEvalResult | None = None
    stop = min(
        config.max_steps, config.max_steps if config.stop_at_step is None else config.stop_at_step
    )
    first_step = run.step  # a resume's checkpoint step; 0 for a new run
    # step_sums, summed on the device: reading them every step would make the GPU wait for
    # the CPU.
    sums = torch.zeros(len(step_sums(run.model.config.nsp)), dtype=torch.float64, device=env.device)
    run.model.train()
    while run.step < stop:
        grad_norm = train_step(run, sums)
        stop_request.check_interrupted()
        run.step += 1
        logged = run.step % config.log_every == 0 or run.step == stop
        if logged:
            last_train = _log_train(run, sums, grad_norm, show=False)
        if (run.heldout is not None or run.heldouts) and (
            run.step == stop or (config.eval_every and run.step % config.eval_every == 0)
        ):
            try:
                last_eval = _evaluate(run, lambda: stop_request.signal is not None)
            except EvaluationStopped as stopped:  # the stop below checkpoints at once
                if env.is_main:
                    _LOG.warning("step %d held-out evaluation %s: stopping", run.step, stopped)
        if logged:  # after the evaluation: a mix's line shows its held-out figures
            _show_progress(run, last_train)
        checkpointed = run.step % config.checkpoint_every == 0 or run.step == stop
        if checkpointed:
            _checkpoint(run)
        if run.step < stop and (preempted := stop_request.agreed(env)):
            if run.step % config.log_every:
                last_train = _log_train(run, sums, grad_norm)
            if not checkpointed:
                _checkpoint(run)
            break
    if run.step == stop == 0:  # --stop-at-step 0: the model the run starts from, as it is
        _checkpoint(run)
    run.progress.close()
    run.logger.close()
    _check_lock(run)
    if env.is_main:
        run.directory.push()  # to the bucket: the last metrics and events
    return {
        "step": run.step,
        "first_step": first_step,
        "train": last_train,
        "eval": last_eval.as_dict() if last_eval else None,
        "preempted": signal_name(preempted) if preempted else None,
    }


def trained_steps(first_step: int, step: int) -> str:
    """What this process trained, for the closing line: a resume names the steps it added,
    not the checkpoint's total."""
    if first_step == 0:
        return f"trained {step} steps"
    if step == first_step:
        return f"trained no step (the checkpoint is at step {step} already)"
    return f"trained {step - first_step} steps ({first_step + 1}-{step}, resumed at {first_step})"


def _log_train(
    run: Run, sums: torch.Tensor, grad_norm: torch.Tensor | None, show: bool = True
) -> dict[str, Any]:
    """The steps since the last log line, summed over ranks (one all-reduce), then zeroed;
    on the progress line too unless not `show` (the loop shows it after an evaluation)."""
    if run.env.device.type == "cuda":
        torch.cuda.synchronize(run.env.device)
    # The ranks' own throughput counts ride on the same all-reduce: the job's rates.
    counted = torch.tensor(run.meter.counts(), dtype=torch.float64, device=run.env.device)
    total = distributed.all_reduce_sum(run.env, torch.cat([sums, counted])).tolist()
    names = step_sums(run.model.config.nsp)
    summed = dict(zip(names, total[: len(names)], strict=True))
    job_counts = total[len(names) :]
    micros = summed["micro_batches"]
    metrics = {
        "loss": summed["loss"] / micros,
        "mlm_loss": summed["mlm_loss"] / micros,
        "mlm_accuracy": summed["mlm_correct"] / max(summed["predictions"], 1),
    }
    if "nsp_loss" in summed:  # absent, not 0, without the NSP head
        metrics["nsp_loss"] = summed["nsp_loss"] / micros
        metrics["nsp_accuracy"] = summed["nsp_correct"] / max(summed["sequences"], 1)
    metrics |= {
        "lr": applied_lr(run.scheduler),  # what the row's last step trained at
        "grad_norm": float(grad_norm) if grad_norm is not None else None,
        "epoch": run.loader.position.epoch,
        **run.meter.lap(job_counts, devices=run.env.world_size),
    }
    if run.scaler is not None:  # fp16: the loss scale, and the steps it skipped since the last row
        scaling, skipped = run.scaler.row(run.step)
        metrics |= scaling
        if skipped and run.env.is_main:
            _LOG.warning(
                "step%s %s skipped: fp16 gradients overflowed (inf or NaN), loss scale now %g",
                "s" if len(skipped) > 1 else "",
                ", ".join(map(str, skipped)),
                scaling["loss_scale"],
            )
    if run.mix is not None:  # the samples each source gave up to this row's position
        global_batch = run.config.micro_batch_size * run.accumulation * run.env.world_size
        metrics["drawn"] = drawn_per_source(
            run.mix, run.config.seed, global_batch, run.loader.position
        )
    run.logger.log(run.step, "train", metrics)
    if show:
        _show_progress(run, metrics)
    sums.zero_()
    return metrics


def _show_progress(run: Run, metrics: dict[str, Any]) -> None:
    run.progress.update(run.step, {"loss": metrics["loss"], "seq/s": metrics["seq_per_s"]})


def _evaluate(run: Run, stop: Callable[[], bool] | None = None) -> EvalResult | MixEvalResult:
    """The held-out split (part of it with --eval-batches), logged and returned; in a mix,
    each source's held-out split in turn (--eval-batches each) and the mix's figures."""
    config = run.config
    # --eval-batches counts batches of the whole run, not of a rank: the same first
    # sequences of the split on any number of processes (trainer/evaluate.py).
    limit = config.eval_batches * config.micro_batch_size or None
    autocast = run.autocast if run.precision != "fp32" else None
    result: EvalResult | MixEvalResult
    # The stored masks where the split has them, whatever the training's (trainer/recipe.py).
    heldout = next(iter(run.heldouts.values())) if run.heldouts else run.heldout
    assert heldout is not None
    masking = heldout_masking(run.recipe, heldout)
    if run.heldouts:
        result = evaluate_sources(
            run.model,
            run.heldouts,
            run.weights,
            run.env,
            config.micro_batch_size,
            limit,
            autocast=autocast,
            compiled=run.eval_forward,
            pad_to=heldout_shape(run.pad_to, run.heldouts.values(), masking),
            masking=masking,
            seed=config.seed,
            stop=stop,
        )
        run.progress.hold({f"{name} held-out": r.mlm_loss for name, r in result.sources.items()})
    else:
        result = evaluate(
            run.model,
            run.heldout,
            run.env,
            config.micro_batch_size,
            limit,
            autocast,  # type: ignore[arg-type]
            run.eval_forward,
            heldout_shape(run.pad_to, [run.heldout], masking),
            masking,
            config.seed,
            stop,
        )
    run.logger.log(run.step, "eval", result.as_dict())
    if run.env.is_main:
        _LOG.info("step %d held-out: %s", run.step, result.summary())
    run.meter.lap()  # evaluation time is not training throughput
    return result


def _check_lock(run: Run) -> None:
    """Every rank stops if rank 0 no longer holds the run directory's lock (another trainer
    may be writing there now): one all-reduce, before every checkpoint and the last upload."""
    lost: RunLockLost | None = None
    try:
        run.directory.check_lock()
    except RunLockLost as error:
        lost = error
    if distributed.agree_max(run.env, 1 if lost else 0):
        raise lost or RunLockLost("rank 0 no longer holds the run lock")


def _checkpoint(run: Run) -> None:
    """Rank 0 writes OUTPUT/checkpoints/step-NNNNNNNN.pt; every rank waits for it."""
    _check_lock(run)
    rng = distributed.rng_state(run.env)  # a collective: every rank takes part
    if run.env.is_main:
        payload = _checkpoint_payload(run, rng)
        path = save_checkpoint(
            run.directory.checkpoints, run.step, payload, run.config.keep_checkpoints
        )
        shown = run.directory.mirror(path, before_push=run.logger.flush)
        _LOG.info("step %d: wrote %s", run.step, shown)
    distributed.barrier(run.env)


def _checkpoint_payload(run: Run, rng: dict[str, Any]) -> dict[str, Any]:
    """Everything --resume needs to go on exactly, and export-hf to rebuild the model."""
    config, source = run.config, run.source
    assert source.manifest is not None
    # Paths to other artifacts are relative to the checkpoint (an s3:// run's URL), so a run's
    # tree copied with its shards and vocabulary keeps its links (pipelines/io/recorded_paths).
    checkpoints = run.directory.checkpoints_url
    data = run.data
    if data and data.get("manifest"):
        data = {**data, "manifest": record_path(data["manifest"], checkpoints)}
    if data and data.get("sources"):  # a mix: each source's manifest so too
        sources = [
            {**each, "manifest": record_path(each["manifest"], checkpoints)}
            for each in data["sources"]
        ]
        data = {**data, "sources": sources}
    return {
        CheckpointKey.FORMAT: CHECKPOINT_FORMAT,
        CheckpointKey.STEP: run.step,
        CheckpointKey.MODEL_CONFIG: asdict(run.model.config),
        CheckpointKey.MODEL: run.model.state_dict(),
        CheckpointKey.OPTIMIZER: run.optimizer.state_dict(),
        CheckpointKey.SCHEDULER: run.scheduler.state_dict(),
        CheckpointKey.DATA_POSITION: run.loader.position.to_dict(),
        CheckpointKey.RNG: rng,
        CheckpointKey.TRAIN_CONFIG: storage.redact_values(config.record()),
        CheckpointKey.DATA: data,
        CheckpointKey.VOCAB: run.vocab_record,
        CheckpointKey.WORLD_SIZE: run.env.world_size,
        CheckpointKey.NUM_WORKERS: config.num_workers,
        # A released BERT the run started from (trainer/released.py): export-hf's tokenizer.
        **({CheckpointKey.START: run.start} if run.start else {}),
        # fp16's loss scale and growth tracker (trainer/precision.py); bf16 and fp32: none.
        **({CheckpointKey.GRAD_SCALER: run.scaler.state_dict()} if run.scaler else {}),
        # The layers' kernels, which a resume under auto takes again (trainer/levers.py).
        **({CheckpointKey.KERNELS: run.kernels} if run.kernels else {}),
    }


# --------------------------------------------------------------------------- command line


# The loggers of bertkit's modules: "bertkit.train", and each module's own name.
LOG_NAMESPACES = ("bertkit", "trainer", "pipelines")


def run(argv: list[str] | None = None) -> int:
    # Where this command sets up logging: bertkit's own lines at INFO, other libraries' only
    # from WARNING (botocore's INFO "Found credentials in environment variables." is not the
    # user's news). A caller that set it up already (the demo, a program) keeps its own.
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
        for ours in LOG_NAMESPACES:
            logging.getLogger(ours).setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        handler.addFilter(storage.RedactingFilter())
    args = sys.argv[1:] if argv is None else list(argv)
    config = parse_arguments(args)
    started = time.monotonic()
    try:
        result = train(config)
    except RunFailed as error:
        print(f"bertkit train: error: {storage.redact(str(error))}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError, OSError) as error:  # Data/CheckpointError too
        print(f"bertkit train: error: {storage.redact(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bertkit train: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except RunLockLost as error:  # a scheduler requeues exit 75; the requeue sees who holds it
        if int(os.environ.get("RANK", "0")) == 0:
            print(
                f"bertkit train: {storage.redact(str(error))} (exit {PREEMPTED_EXIT_CODE})",
                file=sys.stderr,
            )
        return PREEMPTED_EXIT_CODE
    if result["preempted"]:
        if int(os.environ.get("RANK", "0")) == 0:
            print(
                f"stopped by {result['preempted']} after step {result['step']}, checkpoint "
                f"written: rerun with --resume (exit {PREEMPTED_EXIT_CODE})"
            )
        return PREEMPTED_EXIT_CODE
    if int(os.environ.get("RANK", "0")) == 0:
        minutes = (time.monotonic() - started) / 60
        output = storage.redact(config.output)
        print(
            f"{trained_steps(result['first_step'], result['step'])} in {minutes:.1f} min → {output}"
        )
        if result["eval"]:
            e = result["eval"]
            nsp = f", NSP accuracy {e['nsp_accuracy']:.3f}" if "nsp_accuracy" in e else ""
            what = "held-out (the mix, weighted by --mix)" if "sources" in e else "held-out"
            print(
                f"{what}: MLM loss {e['mlm_loss']:.3f} (perplexity "
                f"{math.exp(min(e['mlm_loss'], 50)):.1f}), MLM accuracy "
                f"{e['mlm_accuracy']:.3f}{nsp}"
            )
            for name, each in e.get("sources", {}).items():
                nsp = f", NSP accuracy {each['nsp_accuracy']:.3f}" if "nsp_accuracy" in each else ""
                print(
                    f"  {name}: MLM loss {each['mlm_loss']:.3f} (perplexity "
                    f"{math.exp(min(each['mlm_loss'], 50)):.1f}), MLM accuracy "
                    f"{each['mlm_accuracy']:.3f}{nsp}"
                )
        if result["step"] < config.max_steps:  # --stop-at-step ended it
            world_size = int(os.environ.get("WORLD_SIZE", "1"))
            global_batch = config.micro_batch_size * world_size
            global_batch *= accumulation_steps(config, world_size)
            command = storage.redact(resume_command(args, world_size, global_batch))
            launch = (
                f" (or these flags under the same torchrun launch of {world_size} processes)"
                if world_size > 1
                else ""
            )
            print(
                f"stopped at step {result['step']} of {config.max_steps} (--stop-at-step); "
                f"to go on: bertkit train {command}{launch}"
            )
    return 0


def _means(arg: str, flag: str) -> bool:
    """Whether `arg` names `flag` as argparse reads it: the flag, its `_` spelling, or an
    abbreviation (which parsed, so it named no other flag); `=VALUE` may follow."""
    name = arg.split("=", 1)[0].replace("_", "-")
    return arg.startswith("--") and len(name) > 2 and flag.startswith(name)


def resume_command(args: list[str], world_size: int = 1, global_batch: int = 0) -> str:
    """The flags that go on with a run stopped by --stop-at-step: the same ones, without
    --stop-at-step (or --overwrite, which would start it over), with --resume; in whatever
    spelling they were given (`--stop_at_step 2`, `--stop-at=2`, `--over`). A run of several
    processes that left --global-batch-size to them gets it written out: one process,
    accumulating, then reads the same global batches (a resume needs the same one)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if _means(arg, "--stop-at-step"):
            skip = "=" not in arg  # its value follows
            continue
        if _means(arg, "--overwrite"):
            continue
        kept.append(arg)
    if world_size > 1 and not any(_means(arg, "--global-batch-size") for arg in kept):
        kept += ["--global-batch-size", str(global_batch)]
    if not any(_means(arg, "--resume") for arg in kept):
        kept.append("--resume")
    return shlex.join(kept)


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))
