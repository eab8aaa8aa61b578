"""What a training run starts from, as one `Start`: nothing (a fresh model), its own
checkpoint (--resume), another run's checkpoint (--init-checkpoint), or a released model;
checked against the run's flags; and, on --resume, the state it restores (optimizer
moments, generators, the data position).

A resume follows the flags it is given where they may change (`RESUME_FOLLOWS`: the
schedule, rebuilt at the resumed step (trainer/optim.py), the optimizer's settings,
clipping, the precision, the step's kernels, what is logged, evaluated and kept) and logs
in one line every one that changed; what cannot go on (data, model, global batch, another
optimizer, a --max-steps already passed, an fp16 run in another precision) is refused
before any work. --init-checkpoint is never one of the files --overwrite deletes.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from pipelines.command.flags import flag_name
from pipelines.io import storage
from pipelines.io.hashing import stable_hash64
from pipelines.io.places import same_place_key
from schemas.checkpoint import CHECKPOINTS_DIR, CheckpointKey
from trainer import distributed
from trainer.choices import MODEL_SIZES
from trainer.config import TrainConfig
from trainer.data import DataPosition
from trainer.precision import check_resume_precision, precision_change
from trainer.released import (
    CONFIG_FILE,
    PYTORCH_FILE,
    PYTORCH_INDEX,
    SAFETENSORS_FILE,
    SAFETENSORS_INDEX,
    START_RELEASED,
    TF_CONFIG_FILE,
    TOKENIZER_FILES,
    Released,
    ReleasedModelError,
    carried_start,
    is_released_directory,
    preset_name,
    read_released,
    released_model_config,
)
from trainer.run.checkpoints import (
    CheckpointError,
    check_resumable,
    has_global_position,
    load_checkpoint,
    resolve_checkpoint,
    saved_accumulation,
)
from trainer.run.directory import RunDirectory
from trainer.run.remote import fetch_checkpoint

_LOG = logging.getLogger("bertkit.train")


# The ways a run starts (`Start.kind`); START_RELEASED, a released BERT (--init-checkpoint
# DIR), is the kind its checkpoints' start record names (trainer/released.py).
START_NOTHING = "nothing"  # a fresh model, initialised from --seed
START_RESUME = "resume"  # the run's own latest checkpoint (--resume)
START_CHECKPOINT = "checkpoint"  # another run's checkpoint's weights (--init-checkpoint)
DEFAULT_MODEL = "base"  # --model left out: the preset a fresh run trains


@dataclass(frozen=True)
class Start:
    """What a run starts from: its kind, the checkpoint as read (resume and checkpoint),
    the released model as read (released, trainer/released.py), and where it came from, as
    shown to the user (a URL, not its staging copy)."""

    kind: str = START_NOTHING
    checkpoint: dict[str, Any] | None = None
    where: str | None = None
    released: Released | None = None

    @property
    def resumed(self) -> dict[str, Any] | None:
        """The checkpoint --resume goes on from (optimizer, generators, data position)."""
        return self.checkpoint if self.kind == START_RESUME else None

    @property
    def weights(self) -> dict[str, Any] | None:
        """The bertkit checkpoint whose model (architecture and weights) the run starts
        from: the resumed one or --init-checkpoint's; None for a fresh or released model."""
        return self.checkpoint


def start_from(
    config: TrainConfig,
    env: distributed.Distributed,
    directory: RunDirectory,
    data: dict[str, Any],
    precision: str | None = None,
) -> tuple[Start, TrainConfig]:
    """(what the run starts from, the config resolved, --model filled in): --resume with a
    checkpoint in the run directory resumes it (`precision`: --precision as resolved on the
    device, checked and compared with the checkpoint's); else --init-checkpoint's, a
    released BERT's directory or a bertkit checkpoint (on s3:// or gs://, downloaded
    first); else nothing, a fresh model."""
    given = config
    config = config.resolved()
    start = Start()
    if config.resume:
        start, config = _resumed(given, config, env, directory, data, precision)
    if start.kind == START_NOTHING and config.init_checkpoint:
        start = _init_checkpoint(config.init_checkpoint, directory)
        if start.kind == START_CHECKPOINT and env.is_main:
            assert start.checkpoint is not None
            _LOG.info(
                "--init-checkpoint: the model's weights from %s (its step %d); this run's "
                "optimizer and schedule start at step 0",
                start.where,
                start.checkpoint[CheckpointKey.STEP],
            )
    if start.released is not None:
        return start, replace(config, model=_released_model_name(start.released, config.model))
    init = start.weights
    if init is None:
        return start, replace(config, model=config.model or DEFAULT_MODEL)
    saved_model = init[CheckpointKey.TRAIN_CONFIG].get("model")
    if config.model is None:
        return start, replace(config, model=saved_model)
    if saved_model != config.model:
        # A released model's shape may be no preset ("custom"): no --model names it.
        fix = f"pass --model {saved_model}" if saved_model in MODEL_SIZES else "leave --model out"
        raise ValueError(
            f"the checkpoint holds a {saved_model} model, --model is {config.model}: {fix}"
        )
    return start, config


def _resumed(
    given: TrainConfig,
    config: TrainConfig,
    env: distributed.Distributed,
    directory: RunDirectory,
    data: dict[str, Any],
    precision: str | None,
) -> tuple[Start, TrainConfig]:
    """The run's own latest checkpoint, checked against the flags and the data; nothing
    (with a warning) if the run stopped before its first."""
    path = directory.latest()
    if path is None:
        if not env.is_main:  # said once, not once a process
            return Start(), config
        _LOG.warning(
            "--resume: %s/%s has no checkpoint yet (the run stopped before its first): "
            "starting at step 0%s",
            storage.redact(config.output.rstrip("/")),
            CHECKPOINTS_DIR,
            " from --init-checkpoint" if config.init_checkpoint else "",
        )
        return Start(), config
    # A run on s3:// or gs://: name the object, not the staging copy of it.
    shown = directory.shown(path)
    resumed = load_checkpoint(path, shown if directory.remote is not None else None)
    check_resumable(resumed, storage.redact_values(asdict(config)), env.world_size, data)
    config = given.resolved(resumed[CheckpointKey.TRAIN_CONFIG])
    _check_resume_flags(config, resumed, shown)
    _check_resume_start(config.init_checkpoint, resumed, shown)
    if env.is_main:
        _LOG.info("--resume: going on from %s (step %d)", shown, resumed[CheckpointKey.STEP])
    if precision is not None:
        check_resume_precision(resumed, precision, config.precision, shown)
    if env.is_main:
        _log_resume(config, resumed, precision)
    return Start(START_RESUME, resumed, shown), config


def _init_checkpoint(location: str, directory: RunDirectory) -> Start:
    """--init-checkpoint's start: a released BERT's directory (trainer/released.py), or a
    bertkit checkpoint (a file, or a run's checkpoints folder through its `latest`),
    downloaded first from s3:// or gs://. A checkpoint's start record (the released model
    its run started from) is rebased to this run's checkpoints folder."""
    if not storage.is_remote(location) and is_released_directory(location):
        return Start(START_RELEASED, where=location, released=read_released(location))
    if not storage.is_remote(location) and (problem := _missing_config(location)):
        raise ReleasedModelError(problem)
    if storage.is_remote(location):
        try:
            path, folder, located = fetch_checkpoint(location)
        except FileNotFoundError as error:  # no `latest`: a released model's directory?
            remote = [name for name in (CONFIG_FILE, TF_CONFIG_FILE) if _has(location, name)]
            if remote:
                url = storage.redact(location.rstrip("/"))
                copy = (
                    f"gcloud storage cp '{url}/*' DIR"
                    if url.startswith("gs://")
                    else f"aws s3 cp --recursive {url} DIR"
                )
                raise ReleasedModelError(
                    f"--init-checkpoint {url} holds {remote[0]}: a released model's "
                    f"directory, which must be local: download it first (`{copy}`), then "
                    "pass --init-checkpoint DIR"
                ) from error
            raise
        shown = f"{storage.redact(located)}/{path.name}"
        try:
            deleted = directory.deletes(f"{located.rstrip('/')}/{path.name}")
            _refuse_deleted(location, shown, deleted, directory)
            checkpoint = load_checkpoint(path, shown)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        from_dir = shown.rsplit("/", 1)[0]
    else:
        path = resolve_checkpoint(location)
        _refuse_deleted(location, str(path), directory.deletes(path), directory)
        checkpoint, shown, from_dir = load_checkpoint(path), str(path), str(path.parent)
    record = checkpoint.get(CheckpointKey.START)
    if record:
        record = carried_start(record, from_dir, directory.checkpoints_url)
        checkpoint = {**checkpoint, CheckpointKey.START: record}
    return Start(START_CHECKPOINT, checkpoint, shown)


def _refuse_deleted(location: str, shown: str, deleted: bool, directory: RunDirectory) -> None:
    """Refuse an --init-checkpoint that resolves (`shown`) to one of the earlier run's
    checkpoints that --overwrite deletes once every check has passed (`deleted`): the run
    would start from a checkpoint it then deletes. Nothing is deleted yet."""
    if not deleted:
        return
    given = storage.redact(location)
    named = " is" if given.rstrip("/") == shown else f" is {shown},"
    raise CheckpointError(
        f"--init-checkpoint {given}{named} one of the earlier run's checkpoints that "
        f"--overwrite deletes from {storage.redact(directory.output)} (nothing is deleted "
        "yet): copy it out of the run directory and pass the copy, or write this run to "
        "another --output"
    )


def _has(url: str, name: str) -> bool:
    """Whether the object storage prefix `url` holds `name` (False where it cannot be read)."""
    try:
        return storage.exists(storage.join(url.rstrip("/"), name))
    except OSError:
        return False


def _missing_config(location: str) -> str | None:
    """One line for a directory holding a released model's weights or tokenizer files but no
    config.json (nor a TF checkpoint's bert_config.json): a download cut short. None else."""
    if not os.path.isdir(location) or is_released_directory(location):
        return None
    names = (SAFETENSORS_FILE, SAFETENSORS_INDEX, PYTORCH_FILE, PYTORCH_INDEX, *TOKENIZER_FILES)
    found = [n for n in sorted(os.listdir(location)) if n in names or n.endswith(".ckpt.index")]
    if not found:
        return None
    more = f" and {len(found) - 1} more of a model's files" if len(found) > 1 else ""
    return (
        f"{location} holds {found[0]}{more} but no {CONFIG_FILE}, which a released model's "
        f"directory needs ({TF_CONFIG_FILE} for Google's TF checkpoint): a download cut "
        f"short? Put the model's {CONFIG_FILE} there"
    )


def _released_model_name(released: Released, flag: str | None) -> str:
    """The run's --model for a released model: its preset's name where its shape is one
    (trainer/choices.py MODEL_SIZES), else "custom"; a --model given must be that preset."""
    config = released_model_config(released, "mlm")
    name = preset_name(config)
    if flag is not None and flag != name:
        shape = (
            f"{config.num_hidden_layers} layers × {config.hidden_size} "
            f"({config.num_attention_heads} heads, intermediate {config.intermediate_size})"
        )
        what = f"a {name} ({shape})" if name else f"{shape}, no preset"
        fix = f"pass --model {name} or leave it out" if name else "leave --model out"
        raise ReleasedModelError(
            f"--model {flag}: the released BERT at {released.directory} is {what}; {fix}"
        )
    return name or "custom"


# The flags a resume takes from its command line, where the checkpoint's run had others:
# the schedule's and the optimizer's settings (the schedule is rebuilt at the resumed step,
# trainer/optim.py), gradient clipping, FP8, the step's kernels and compilation, the device,
# the micro-batch (the global batch is checked) and the loader's processes, and what is
# logged, evaluated and kept. Each one changed is said in --resume's one line, in this order.
RESUME_FOLLOWS = (
    "max_steps",
    "warmup_steps",
    "decay_power",
    "lr",
    "weight_decay",
    "beta1",
    "beta2",
    "eps",
    "clip_grad_norm",
    "fp8",
    "fp8_layers",
    "unpad",
    "ffn_epilogue",
    "add_norm",
    "compile",
    "compile_mode",
    "device",
    "micro_batch_size",
    "num_workers",
    "log_every",
    "eval_every",
    "eval_batches",
    "checkpoint_every",
    "keep_checkpoints",
    "peak_tflops",
    "tensorboard",
)
# Said in that line too, compared otherwise: --precision as resolved on the device
# (trainer/precision.py); the dropout flags, against the checkpoint model's rates, in a line
# of their own (trainer/setup.py).
RESUME_SAID_APART = ("precision", "dropout", "hidden_dropout", "attention_dropout")
# The flags a resume takes with no other meaning than the checkpoint's: the data and its
# order, the global batch, the masking (checkpoints.py check_resumable), the model, its
# positions and objective, the optimizer, the start (above and trainer/setup.py); places
# compared by what they hold (--vocab by its sha256); and those of one command.
RESUME_CHECKED = (
    "shards",
    "output",
    "mix",
    "model",
    "max_seq_length",
    "global_batch_size",
    "optimizer",
    "max_position_embeddings",
    "seed",
    "shuffle_buffer",
    "bucket_window",
    "objective",
    "masking",
    "mask_rate",
    "mask_replace",
    "whole_word_mask",
    "max_predictions",
    "vocab",
    "init_checkpoint",
)
ONE_COMMAND = ("stop_at_step", "resume", "overwrite")


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


def _check_resume_start(flag: str | None, resumed: dict[str, Any], where: str) -> None:
    """Refuse an --init-checkpoint other than the run's own: a resume goes on from the run's
    checkpoint, so another one would be ignored without a word. The same one (as spelled,
    or the same place) is allowed, as a requeue repeats the command line."""
    if flag is None:
        return
    saved = resumed[CheckpointKey.TRAIN_CONFIG].get("init_checkpoint")
    shown = storage.redact(flag)
    if saved is not None and (
        str(saved).rstrip("/") == shown.rstrip("/")
        or same_place_key(str(saved)) == same_place_key(flag)
    ):
        return
    began = (
        f"--init-checkpoint {saved}"
        if saved is not None
        else "a fresh model (no --init-checkpoint)"
    )
    raise ValueError(
        f"--resume: {where} is of a run that started from {began}, and --init-checkpoint is "
        f"{shown}: a resume goes on from the run's own checkpoint; leave --init-checkpoint "
        f"out, or start a new run (another --output) from {shown}"
    )


def _log_resume(config: TrainConfig, resumed: dict[str, Any], precision: str | None) -> None:
    """In one line, what this run's flags change from the checkpoint's (`RESUME_FOLLOWS`,
    and the precision resolved, `precision`); nothing where nothing changed."""
    saved = resumed[CheckpointKey.TRAIN_CONFIG]
    changes = [
        f"{flag_name(name)} {_shown(saved[name])} → {_shown(getattr(config, name))}"
        for name in RESUME_FOLLOWS
        if name in saved and saved[name] != getattr(config, name)
    ]
    if precision is not None and (change := precision_change(resumed, precision, config.precision)):
        changes.append(change)
    if changes:
        _LOG.info(
            "--resume: from step %d on, the run follows this command's flags: %s",
            resumed[CheckpointKey.STEP] + 1,
            ", ".join(changes),
        )


def _shown(value: Any) -> str:
    """A flag's value in --resume's line: a float as --lr 0.001, a switch on or off, an
    unset one "unset"."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return "unset" if value is None else str(value)


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
