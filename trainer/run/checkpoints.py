"""Checkpoints: atomic writes (temp file + rename), a `latest` pointer, the last K kept.

The layout of a checkpoint file is in schemas/checkpoint.py. A crash mid-write leaves a
`.tmp-*` file that no reader looks at; `latest` is rewritten (atomically too) only after the
checkpoint it names is complete, so `--resume` and `bertkit export-hf DIR` always find a
whole one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import torch

from pipelines.io import storage
from pipelines.io.unpickling import load_failure, unpickling_refused
from schemas.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_GLOB,
    CHECKPOINTS_DIR,
    LATEST_FILE,
    LATEST_MAX_BYTES,
    CheckpointKey,
    checkpoint_name,
    parse_latest,
)
from trainer.metrics import METRICS_FILE
from trainer.model import BertConfig, BertForPreTraining, shape_problem
from trainer.run.leftovers import foreign_problem, leftovers_problem
from trainer.run.location import CheckpointError
from trainer.run.lock import LOCK_FILE
from trainer.source import mix_resume_problems

_LOG = logging.getLogger(__name__)


# What a training run writes in its directory, and nothing else: all `--overwrite` deletes.
# Names relative to the run directory, `/`-separated; none reaches into a folder of its own.
_RUN_FILE = re.compile(
    rf"{CHECKPOINTS_DIR}/(?:step-[0-9]{{8}}\.pt|{re.escape(LATEST_FILE)})"
    rf"|{re.escape(METRICS_FILE)}|events\.out\.tfevents\.[^/]+|{re.escape(LOCK_FILE)}"
)
_CHECKPOINT_FILE = re.compile(rf"{CHECKPOINTS_DIR}/step-[0-9]{{8}}\.pt")
# torch.compile's caches (trainer/compiling.py): the run's own, yet not a run file:
# --overwrite keeps them for the next run here (what they hold is keyed by its graphs), and
# nothing deletes them.
COMPILE_CACHE_DIR = "compile-cache"
# The same cache on object storage: one archive at OUTPUT/compile-cache.tar (remote.py), kept
# as the folder is.
COMPILE_CACHE_ARCHIVE = "compile-cache.tar"
# A checkpoint or `latest` write that never reached its rename (a kill, a full disk): only in
# a local run directory (a run on object storage uploads whole files, never these).
_TEMPORARY = re.compile(r"\.tmp-[0-9a-f]{32}-(?:step-[0-9]{8}\.pt|" + re.escape(LATEST_FILE) + ")")


def _run_paths(output: Path) -> Iterator[Path]:
    """Everything under the run directory but torch.compile's cache (no run file is there,
    and inductor's files may be many: a start does not walk them)."""
    if not output.is_dir():
        return
    for child in output.iterdir():
        if child.name == COMPILE_CACHE_DIR:
            continue
        yield child
        if child.is_dir() and not child.is_symlink():
            yield from child.rglob("*")


def is_checkpoint_file(name: str) -> bool:
    """Whether `name` (relative to a run directory) is a checkpoint: checkpoints/step-N.pt."""
    return bool(_CHECKPOINT_FILE.fullmatch(name))


def is_run_file(name: str, local: bool = True) -> bool:
    """Whether `name` (relative to a run directory, `/`-separated) is a file a training run
    writes there: a checkpoint, `latest`, metrics.jsonl, a TensorBoard event file, and in a
    local directory the temporaries of a checkpoint write cut short."""
    if _RUN_FILE.fullmatch(name):
        return True
    folder, _, base = name.partition("/")
    return local and folder == CHECKPOINTS_DIR and bool(_TEMPORARY.fullmatch(base))


def save_checkpoint(directory: Path, step: int, payload: dict[str, Any], keep: int) -> Path:
    """Write `step-NNNNNNNN.pt`, point `latest` at it, then keep it and the newest `keep - 1`
    others: the checkpoint just written (the one `latest` names) is never deleted."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / checkpoint_name(step)
    temporary = directory / f".tmp-{uuid.uuid4().hex}-{path.name}"
    with _written_or_removed(temporary, path) as file:
        torch.save(payload, file)
        _flush_to_disk(file)
    os.replace(temporary, path)
    pointer = directory / f".tmp-{uuid.uuid4().hex}-{LATEST_FILE}"
    with _written_or_removed(pointer, path) as file:
        file.write(f"{path.name}\n".encode())
        _flush_to_disk(file)
    # On disk before `latest` names it: after a power cut `latest` never names a checkpoint
    # whose bytes were still in the page cache.
    os.replace(pointer, directory / LATEST_FILE)
    _sync_directory(directory)
    others = sorted(p for p in directory.glob(CHECKPOINT_GLOB) if p.name != path.name)
    for old in others[: max(0, len(others) - max(keep - 1, 0))]:
        old.unlink()
    return path


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written (a full disk, a quota), said in one line."""

    def __str__(self) -> str:
        return self.strerror or ""


@contextmanager
def _written_or_removed(temporary: Path, path: Path) -> Iterator[BinaryIO]:
    """`temporary` opened for writing; if writing it fails, it is removed and the failure
    raised as one CheckpointWriteError naming `path`. A full disk fails inside torch.save
    twice: the OSError of the write, then torch's own RuntimeError ("[enforce fail at
    inline_container.cc…] unexpected pos") as it closes the archive; the OSError is the
    one that says what happened."""
    try:
        with open(temporary, "wb") as file:
            yield file
    except BaseException as error:
        with contextlib.suppress(OSError):  # the write's error is the one to tell
            temporary.unlink()
        cause = _os_error_in(error)
        if cause is None:
            raise
        reason = os.strerror(cause.errno) if cause.errno else str(cause)
        raise CheckpointWriteError(
            cause.errno,
            f"writing the checkpoint {path} failed ({reason}): free space there, then "
            + _how_to_go_on(path.parent),
        ) from error


def _how_to_go_on(directory: Path) -> str:
    """After a failed write: resume from the checkpoint `latest` still names, if any."""
    try:
        name = _read_latest(directory / LATEST_FILE)
    except (OSError, ValueError):  # none yet (the run's first), or not one to trust
        return "rerun the same command"
    return f"rerun with --resume (latest still names {name})"


def _os_error_in(error: BaseException) -> OSError | None:
    """The OSError `error` is or arose from (its chain of causes and contexts), or None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError):
            return current
        current = current.__cause__ or current.__context__
    return None


def _flush_to_disk(file: BinaryIO) -> None:
    file.flush()
    os.fsync(file.fileno())


def _sync_directory(directory: Path) -> None:
    """Make the renames in `directory` durable (POSIX: fsync the directory itself)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def check_output_outside_shards(output: str, shards: str) -> None:
    """A run directory inside the shards directory would mix checkpoints into the data
    (a local path or a prefix of the same bucket)."""
    head = shards.split("{")[0]  # a brace pattern: its fixed head
    named_file = "{" in shards or head.endswith((".json", ".tar"))
    if storage.is_remote(shards) or storage.is_remote(output):
        shards_dir = (storage.parent(head) if named_file else head).rstrip("/")
        if not f"{output.rstrip('/')}/".startswith(f"{shards_dir}/"):
            return
    else:
        local = Path(head)
        if not named_file and not local.exists():
            return  # nothing there (a typo): opening the shards says so, not this check
        shards_dir = str(local.parent if named_file or not local.is_dir() else local)
        if not Path(output).resolve().is_relative_to(Path(shards_dir).resolve()):
            return
    raise CheckpointError(
        f"--output {storage.redact(output)} is inside the shards directory "
        f"{storage.redact(shards_dir)}: write the run beside the data, e.g. --output runs/NAME"
    )


# The flags that decide the epoch's order (trainer/order.py) besides the global batch, which
# is compared resolved. The data itself (which shards, of which length) is compared by what
# it is, not by the flags that named it.
_ORDER_FLAGS = ("seed", "shuffle_buffer", "bucket_window")
# The flags that shape dynamic masks (trainer/masking.py): the masks drawn after a resume
# are the uninterrupted run's only with the same ones.
_MASKING_FLAGS = ("mask_rate", "mask_replace", "whole_word_mask", "max_predictions")
# What a checkpoint written before a flag existed ran with.
_INPUT_DEFAULTS = {
    "bucket_window": 0,
    "mask_rate": 0.15,
    "mask_replace": "80/10/10",
    "whole_word_mask": False,
    "max_predictions": None,
}
# The data record's fields a resume compares (schemas/checkpoint.py), in the order named.
_DATA_FIELDS = {
    "max_seq_length": "sequence length",
    "samples_per_epoch": "samples per epoch",
    "shards": "shards",
    "shards_sha256": "the shards' sha256 digest",
}


def global_batch(train_config: dict[str, Any], world: int) -> int:
    """The sequences a step of these flags takes on `world` processes: --global-batch-size,
    or one micro-batch per process."""
    return train_config.get("global_batch_size") or train_config["micro_batch_size"] * world


def has_global_position(checkpoint: dict[str, Any]) -> bool:
    """Whether the checkpoint's data position counts global batches (any world size can go
    on from it), not one rank's micro-batches (a checkpoint written before elastic resume)."""
    position = checkpoint.get(CheckpointKey.DATA_POSITION)
    return isinstance(position, dict) and "global_batches" in position


def saved_accumulation(checkpoint: dict[str, Any]) -> int:
    """Micro-batches per step on each rank of the run that wrote the checkpoint."""
    saved, world = checkpoint[CheckpointKey.TRAIN_CONFIG], checkpoint[CheckpointKey.WORLD_SIZE]
    return global_batch(saved, world) // (saved["micro_batch_size"] * world)


def check_resumable(
    checkpoint: dict[str, Any],
    current: dict[str, Any],
    world: int,
    data: dict[str, Any] | None = None,
) -> None:
    """A resume goes on with the global batches an uninterrupted run would have read, on
    any number of processes, if the epoch's order is the same (trainer/order.py): the same
    global batch (micro-batch × processes × accumulation, resolved), seed, shuffle and
    bucketing flags (`current`: the run's config as the checkpoint records it, credentials
    redacted), the same micro-batch too when bucketing, and the same data (`data`: the
    record `data_record` makes of the shards the run opened). Shards rebuilt under the same
    path (another seed, length or corpus) are other data; the same shards moved elsewhere
    are not. A checkpoint written before positions were global needs its world size too."""
    saved = checkpoint[CheckpointKey.TRAIN_CONFIG]
    problems = []
    was_world = checkpoint[CheckpointKey.WORLD_SIZE]
    was, now = global_batch(saved, was_world), global_batch(current, world)
    if was != now:
        problems.append(
            f"global batch {was} ({_batch_parts(saved, was_world)}), now {now} "
            f"({_batch_parts(current, world)}): pass --global-batch-size {was}"
        )
    if not has_global_position(checkpoint) and was_world != world:
        problems.append(
            f"{was_world} processes, now {world} (a checkpoint written before elastic resume "
            "goes on with as many processes as wrote it)"
        )
    was_micro, micro = saved["micro_batch_size"], current["micro_batch_size"]
    if current.get("bucket_window") and was_micro != micro:
        problems.append(
            f"--micro-batch-size {was_micro}, now {micro} (--bucket-window sorts by length "
            "within each micro-batch's slots)"
        )
    # The masking as resolved (`auto` is static or dynamic by the shards); a checkpoint from
    # before dynamic masking was static.
    saved_data = checkpoint.get(CheckpointKey.DATA) or {}
    was_masking = saved_data.get("masking", "static")
    masking = data.get("masking", "static") if data is not None else was_masking
    if was_masking != masking:
        problems.append(f"{was_masking} masking, now {masking}: pass --masking {was_masking}")
    masking_flags = _MASKING_FLAGS if masking == "dynamic" else ()
    for name in (*_ORDER_FLAGS, *masking_flags):
        was_value = saved.get(name, _INPUT_DEFAULTS.get(name))
        if was_value != current[name]:
            flag = "--" + name.replace("_", "-")
            problems.append(f"{flag} {was_value}, now {current[name]}")
    mixed = mix_resume_problems(saved_data, data) if data is not None else None
    if mixed is not None:  # a mix, before or now: its sources and shares (trainer/source.py)
        problems += mixed
    elif data is not None:
        was_shards, shards = _one_source(saved.get("shards")), _one_source(current.get("shards"))
        if "shards_sha256" not in saved_data and was_shards != shards:
            # a checkpoint from before the data digest: the shards flag is all it has
            problems.append(f"--shards {was_shards}, now {shards}")
        for name, what in _DATA_FIELDS.items():
            if name in saved_data and saved_data[name] != data[name]:
                problems.append(f"{what} {_short(saved_data[name])}, now {_short(data[name])}")
    if problems:
        raise ValueError(
            "--resume continues exactly only with the data order and the data the run "
            "started with: "
            + "; ".join(problems)
            + ". Use the original flags and shards, or start a new run with --init-checkpoint"
        )


def _one_source(shards: Any) -> Any:
    """--shards as a one-source run records it: a string (a list of one, in a config that
    takes several, is that string)."""
    if isinstance(shards, list | tuple) and len(shards) == 1:
        return shards[0]
    return shards


def _batch_parts(config: dict[str, Any], world: int) -> str:
    micro = config["micro_batch_size"]
    steps = global_batch(config, world) // (micro * world)
    processes = "process" if world == 1 else "processes"
    return f"micro-batch {micro} × {world} {processes} × {steps} accumulated"


def _short(value: Any) -> str:
    text = str(value)
    return f"{text[:16]}…" if len(text) == 64 else text  # a sha256


def prepare_run_directory(
    output: Path, resume: bool, overwrite: bool, main: bool = True
) -> list[Path]:
    """Check `output` before any work; return the earlier run's files to remove once every
    check has passed. The caller holds the run's lock (trainer/run/lock.py), so no other
    trainer is writing here while this looks.

    A directory holding an earlier run needs --resume (go on) or --overwrite (start over).
    --overwrite deletes only what a run writes (`is_run_file`), and refuses a directory that
    holds anything else, naming it: bertkit never deletes what it did not write. --resume
    deletes only the temporary files of a checkpoint write that was killed before its
    rename: nothing reads them, and no later write would replace them. An earlier run that
    wrote no checkpoint (it failed or was stopped before its first) left only its metrics
    and event files, which nothing can continue: a rerun with the same flags replaces them,
    where its metrics.jsonl is a run's (`_no_checkpoint_leftovers`).
    The paths a run writes must not be symbolic links: a linked checkpoints/ would hide an
    earlier run from these checks and let rotation delete files in the folder it points to.
    """
    if output.exists() and not output.is_dir():
        raise CheckpointError(f"--output {output} is a file: give a run directory")
    _refuse_links(output)
    earlier = sorted(
        p
        for p in _run_paths(output)
        if p.is_file() and is_run_file(p.relative_to(output).as_posix()) and p.name != LOCK_FILE
    )
    names = [p.relative_to(output).as_posix() for p in earlier]
    if resume:
        if any(is_checkpoint_file(n) for n in names):
            return [p for p in earlier if _TEMPORARY.fullmatch(p.name)]
        return _no_checkpoint_leftovers(output, earlier, overwrite, main)
    if not earlier:
        return []
    if not any(is_checkpoint_file(n) or n.endswith(f"/{LATEST_FILE}") for n in names):
        return _no_checkpoint_leftovers(output, earlier, overwrite, main)
    if not overwrite:
        raise CheckpointError(
            f"{output} holds an earlier run ({earlier[0].relative_to(output)}, …): pass --resume "
            "to continue it, or --overwrite to start over (deletes only its checkpoints, "
            "metrics and event files)"
        )
    _refuse_foreign(output, earlier, overwrite=True)
    return earlier


def _refuse_foreign(output: Path, earlier: list[Path], overwrite: bool) -> None:
    """Refuse to delete the run files `earlier` beside a file no run writes."""
    known = {CHECKPOINTS_DIR, LOCK_FILE, *(str(p.relative_to(output)) for p in earlier)}
    foreign = sorted(p for p in _run_paths(output) if str(p.relative_to(output)) not in known)
    if foreign:
        name = str(foreign[0].relative_to(output))
        raise CheckpointError(foreign_problem(str(output), name, overwrite))


def _refuse_links(output: Path) -> None:
    """The run's own paths must be its own: no symbolic link among them."""
    checkpoints = output / CHECKPOINTS_DIR
    candidates = [checkpoints, output / METRICS_FILE]
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        candidates += sorted(checkpoints.iterdir())
    for path in candidates:
        if path.is_symlink():
            if path == checkpoints:
                fix = "Replace the link with a directory"
            elif path.name == LATEST_FILE:
                found = sorted(p.name for p in checkpoints.glob(CHECKPOINT_GLOB))
                newest = found[-1] if found else "step-NNNNNNNN.pt"
                fix = (
                    "Replace the link with a file holding the newest checkpoint's name "
                    f"(rm {path}; echo {newest} > {path})"
                )
            else:
                fix = "Replace the link with the file itself"
            dangling = "" if path.exists() else ", which does not exist"
            raise CheckpointError(
                f"{path} is a symbolic link (to {os.readlink(path)}{dangling}): a run writes, "
                f"rotates and deletes files only in a directory of its own. {fix}, or choose "
                "another --output"
            )


def _no_checkpoint_leftovers(
    output: Path, earlier: list[Path], overwrite: bool, main: bool
) -> list[Path]:
    """An earlier run with no checkpoint: its metrics and event files, to be replaced. Without
    --overwrite only where no other file is beside them and metrics.jsonl is a run's (a run
    opens it before its event file): another tool's log directory is never taken for one."""
    if not earlier:
        return []
    _refuse_foreign(output, earlier, overwrite)
    names = [str(p.relative_to(output)) for p in earlier]
    problem = leftovers_problem(str(output), names, output / METRICS_FILE, overwrite)
    if problem:
        raise CheckpointError(problem)
    (_LOG.warning if main else _LOG.debug)(  # said once, not once a process
        "%s: an earlier run stopped before its first checkpoint; its %s will be replaced",
        output,
        ", ".join(str(p.relative_to(output)) for p in earlier),
    )
    return earlier


def _read_latest(pointer: Path) -> str:
    """The name `latest` holds, checked: a bare step-NNNNNNNN.pt, read 65 bytes at most."""
    with pointer.open("rb") as source:
        data = source.read(LATEST_MAX_BYTES + 1)
    try:
        return parse_latest(data, str(pointer))
    except ValueError as err:
        raise CheckpointError(
            f"{err}; it was changed after the trainer wrote it: pass a checkpoint file "
            "(step-NNNNNNNN.pt) instead, or rewrite `latest` with the newest one's name"
        ) from err


def latest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint `latest` names, or None when the directory holds none yet. A `latest`
    that is missing beside checkpoints, or is not a regular file, is refused: starting over
    there would overwrite the checkpoints and repeat their steps in the metrics."""
    pointer = directory / LATEST_FILE
    if os.path.lexists(pointer) and (pointer.is_symlink() or not pointer.is_file()):
        raise CheckpointError(
            f"{pointer} is not a regular file: the trainer writes the newest checkpoint's name "
            "there. Replace it with a file holding that name (step-NNNNNNNN.pt)"
        )
    if not pointer.is_file():
        found = sorted(p.name for p in directory.glob(CHECKPOINT_GLOB))
        if found:
            raise CheckpointError(
                f"{pointer} is missing, but {directory} holds {', '.join(found)}: `latest` "
                "names the newest complete one, and nothing else says which that is. Write its "
                f"name into {pointer} (echo {found[-1]} > {pointer}) to resume from it, or "
                "pass --overwrite to start over"
            )
        return None
    path = directory / _read_latest(pointer)
    if not path.is_file():
        raise CheckpointError(
            f"{pointer} names {path.name!r}, which is not a file in {directory}: it was "
            "deleted after the trainer wrote it"
        )
    return path


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint file, or the one a checkpoint directory's `latest` file names; a run
    directory (`bertkit train --output`) stands for its checkpoint directory."""
    path = Path(path)
    if path.is_dir():
        if not (path / LATEST_FILE).is_file() and (path / CHECKPOINTS_DIR / LATEST_FILE).is_file():
            path = path / CHECKPOINTS_DIR  # a run directory
        latest = path / LATEST_FILE
        if not latest.is_file():
            raise CheckpointError(
                f"{path} is a directory without a `{LATEST_FILE}` file, so it holds no complete "
                "checkpoint: pass a checkpoint file (step-NNNNNNNN.pt), a checkpoint directory "
                f"or a run directory (its {CHECKPOINTS_DIR}/{LATEST_FILE}) instead"
            )
        name = _read_latest(latest)
        path = path / name
        if not path.is_file():
            raise CheckpointError(
                f"{latest} names {name!r}, which is not a file in {path.parent}: pass a "
                "checkpoint file (step-NNNNNNNN.pt) instead"
            )
        return path
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist: pass a checkpoint file or directory")
    return path


def load_checkpoint(path: Path, shown: str | None = None) -> dict[str, Any]:
    """Read a checkpoint file (tensors and plain containers only) and check its format;
    errors name it as `shown` (the URL a downloaded checkpoint came from) or its path."""
    where = shown or path
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    # What torch.load raises on a file that is not a torch.save archive, or one cut short.
    except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, ValueError) as err:
        refused = unpickling_refused(err)
        if refused is not None:
            raise CheckpointError(
                f"{where} is not a bertkit checkpoint: it holds objects other than tensors and "
                f"plain containers ({refused}), so it is refused, never unpickled; pass a "
                "step-NNNNNNNN.pt file written by the trainer"
            ) from err
        # torch's reason (a cut archive, not a torch file), on one line, without its advice.
        raise CheckpointError(
            f"{where} is not a bertkit checkpoint (torch.load(weights_only=True): "
            f"{load_failure(err)}); pass a step-NNNNNNNN.pt file written by the trainer"
        ) from err
    found = checkpoint.get(CheckpointKey.FORMAT) if isinstance(checkpoint, dict) else None
    if found != CHECKPOINT_FORMAT:
        what = f"format {found!r}" if found is not None else f"a {type(checkpoint).__name__}"
        raise CheckpointError(
            f"{where} is {what}, not a {CHECKPOINT_FORMAT!r} checkpoint: pass a checkpoint "
            "written by this bertkit's trainer"
        )
    for key in (CheckpointKey.MODEL_CONFIG, CheckpointKey.MODEL, CheckpointKey.VOCAB):
        if key not in checkpoint:
            raise CheckpointError(f"{where} lacks the checkpoint's {key!r} entry: it is damaged")
    return checkpoint


def model_from_checkpoint(checkpoint: dict[str, Any], where: str | Path) -> BertForPreTraining:
    """Rebuild the model from `model_config` and load `model` into it, strictly."""
    try:
        config = BertConfig(**checkpoint[CheckpointKey.MODEL_CONFIG])
    except (TypeError, ValueError) as err:
        raise CheckpointError(
            f"{where}: its model_config does not make a trainer.model.BertConfig ({err}); it "
            "was written by another bertkit version"
        ) from err
    problem = shape_problem(config, checkpoint[CheckpointKey.MODEL])
    if problem:
        raise CheckpointError(
            f"{where}: its model_config says {problem}: the checkpoint was changed after the "
            "run wrote it"
        )
    model = BertForPreTraining(config)
    try:
        model.load_state_dict(checkpoint[CheckpointKey.MODEL], strict=True)
    except RuntimeError as err:
        raise CheckpointError(
            f"{where}: its weights do not fit the model its model_config describes ({err}); it "
            "was written by another bertkit version"
        ) from err
    return model.eval()
