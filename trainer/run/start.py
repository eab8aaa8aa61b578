"""What a training run starts from: the checkpoint it resumes (--resume) or takes its
weights from (--init-checkpoint), checked against the run's flags; and, on --resume, the
state it restores (optimizer moments, generators, the data position).

A resume follows the schedule and optimizer flags it is given (`RESUME_FOLLOWS`: the
schedule is rebuilt at the resumed step, trainer/optim.py) and logs in one line what they
change; what cannot go on (data, model, global batch, another optimizer, a --max-steps
already passed) is refused before any work.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from pipelines.io import storage
from pipelines.io.hashing import stable_hash64
from schemas.checkpoint import CHECKPOINTS_DIR, CheckpointKey
from trainer import distributed
from trainer.config import TrainConfig
from trainer.data import DataPosition
from trainer.run.checkpoints import (
    check_resumable,
    has_global_position,
    latest_checkpoint,
    load_checkpoint,
    resolve_checkpoint,
    saved_accumulation,
)
from trainer.run.remote import RemoteRun, fetch_checkpoint

_LOG = logging.getLogger("bertkit.train")


def checkpoints_to_start_from(
    config: TrainConfig,
    env: distributed.Distributed,
    run_dir: Path,
    remote: RemoteRun | None,
    data: dict[str, Any],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, TrainConfig]:
    """(the checkpoint resumed, the checkpoint whose weights start the run, the config
    resolved): --resume with a checkpoint in the run gives both, --init-checkpoint the second
    (on s3:// or gs://, downloaded first), neither a fresh model."""
    resumed: dict[str, Any] | None = None
    init: dict[str, Any] | None = None
    given = config
    config = config.resolved()
    if config.resume:
        path = latest_checkpoint(run_dir / CHECKPOINTS_DIR)
        if path is None:
            _LOG.warning(
                "--resume: %s/%s has no checkpoint yet (the run stopped before its first): "
                "starting at step 0%s",
                storage.redact(config.output.rstrip("/")),
                CHECKPOINTS_DIR,
                " from --init-checkpoint" if config.init_checkpoint else "",
            )
        else:
            # A run on s3:// or gs://: name the object, not the staging copy of it.
            shown = (
                f"{storage.redact(remote.url)}/{CHECKPOINTS_DIR}/{path.name}" if remote else None
            )
            resumed = load_checkpoint(path, shown)
            check_resumable(
                resumed,
                storage.redact_values(asdict(config)),
                env.world_size,
                data,
            )
            config = given.resolved(resumed[CheckpointKey.TRAIN_CONFIG])
            _check_resume_flags(config, resumed, shown or str(path))
            if env.is_main:
                _log_resume(config, resumed, shown or str(path))
            init = resumed
    if resumed is None and config.init_checkpoint:
        if storage.is_remote(config.init_checkpoint):
            path, folder = fetch_checkpoint(config.init_checkpoint)
            url = storage.redact(config.init_checkpoint.rstrip("/"))
            try:
                init = load_checkpoint(path, url if url.endswith(".pt") else f"{url}/{path.name}")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        else:
            init = load_checkpoint(resolve_checkpoint(config.init_checkpoint))
    saved_model = init[CheckpointKey.TRAIN_CONFIG].get("model") if init is not None else None
    if init is not None and saved_model != config.model:
        raise ValueError(
            f"the checkpoint holds a {saved_model} model, --model is {config.model}: pass "
            f"--model {saved_model}"
        )
    return resumed, init, config


# The flags a resume takes from its command line, not from the checkpoint: the schedule's
# and the optimizer's settings (trainer/optim.py). Everything else that shapes the run is
# checked by check_resumable or refused where it is used.
RESUME_FOLLOWS = (
    "max_steps",
    "warmup_steps",
    "decay_power",
    "lr",
    "weight_decay",
    "beta1",
    "beta2",
    "eps",
)


def _check_resume_flags(config: TrainConfig, resumed: dict[str, Any], where: str) -> None:
    """Refuse a resume its flags cannot go on with: another optimizer (its state is the
    other's), or a --max-steps the checkpoint is already past."""
    saved = resumed[CheckpointKey.TRAIN_CONFIG]
    step = resumed[CheckpointKey.STEP]
    was = saved.get("optimizer", "adamw")
    if was != config.optimizer:
        raise ValueError(
            f"--resume: {where} holds {was}'s state, --optimizer is {config.optimizer}: pass "
            f"--optimizer {was}, or start a new run from it with --init-checkpoint"
        )
    if config.max_steps < step:
        raise ValueError(
            f"--resume: {where} is at step {step}, past --max-steps {config.max_steps}: pass "
            f"a --max-steps above {step} to train on"
        )


def _log_resume(config: TrainConfig, resumed: dict[str, Any], where: str) -> None:
    """Which checkpoint the run goes on from, and in one line what its flags change."""
    saved = resumed[CheckpointKey.TRAIN_CONFIG]
    step = resumed[CheckpointKey.STEP]
    _LOG.info("--resume: going on from %s (step %d)", where, step)
    changes = [
        f"--{name.replace('_', '-')} {saved[name]} → {getattr(config, name)}"
        for name in RESUME_FOLLOWS
        if name in saved and saved[name] != getattr(config, name)
    ]
    if changes:
        _LOG.info(
            "--resume: from step %d on, the schedule and optimizer follow this run's flags: %s",
            step + 1,
            ", ".join(changes),
        )


# A param group's settings that come from flags: a resume keeps the optimizer's moments and
# step counts from the checkpoint, and takes these from this run's flags.
_FLAG_SETTINGS = ("lr", "weight_decay", "betas", "eps")


def restore(
    env: distributed.Distributed,
    resumed: dict[str, Any] | None,
    optimizer: torch.optim.Optimizer,
) -> tuple[int, DataPosition]:
    """The step and input position to start from: 0 and the first batch for a new run; for
    --resume the checkpoint's, with its optimizer state (the flags' lr, weight decay, betas
    and eps kept) and this rank's generators (on another number of processes than wrote it,
    generators seeded from (seed, rank, step))."""
    if resumed is None:
        return 0, DataPosition()
    flags = [{key: group[key] for key in _FLAG_SETTINGS} for group in optimizer.param_groups]
    optimizer.load_state_dict(resumed[CheckpointKey.OPTIMIZER])
    for group, settings in zip(optimizer.param_groups, flags, strict=True):
        group.update(settings)
    step = resumed[CheckpointKey.STEP]
    position = DataPosition.from_dict(
        resumed[CheckpointKey.DATA_POSITION], saved_accumulation(resumed)
    )
    if not has_global_position(resumed) and env.is_main:
        # Its position counted one rank's micro-batches in an order this loader no longer
        # makes: the step and the epoch are exact, the rest of the epoch's samples are not.
        _LOG.warning(
            "--resume: the checkpoint was written before elastic resume; it goes on at global "
            "batch %d of epoch %d in this bertkit's data order, which holds other samples "
            "there: until epoch %d ends, some samples come twice and others not at all",
            position.global_batches,
            position.epoch,
            position.epoch,
        )
    rng = resumed[CheckpointKey.RNG]
    if len(rng["torch"]) == env.world_size:
        distributed.restore_rng(env, rng)
    else:
        # Another world size: dropout's per-rank streams cannot go on as they were. Each rank
        # draws from (seed, rank, step) instead, so that no stream repeats an earlier one.
        seed = resumed[CheckpointKey.TRAIN_CONFIG]["seed"]
        torch.manual_seed(stable_hash64(f"resume:{seed}:{env.rank}:{step}") >> 1)
        if env.is_main:
            _LOG.info(
                "--resume on %d processes, the checkpoint's run had %d: the data order goes "
                "on as it was; dropout's random streams start afresh from (seed, rank, step)",
                env.world_size,
                len(rng["torch"]),
            )
    return step, position
