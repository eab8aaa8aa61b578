"""`bertkit inspect RUN_DIR` (or its checkpoints/ directory, or one step-NNNNNNNN.pt): the
checkpoints a training run wrote, which one `latest` names, and what the newest holds: the
model, the recipe, the optimizer and schedule, where in the data it stopped, and what it
trained on.

The layout is schemas/checkpoint.py's. A checkpoint is a `torch.save` file, so reading one
needs torch (the `train` extra); it is read with `torch.load(weights_only=True,
mmap=True)`: tensors and plain containers only, and the weights stay on disk, so a large
checkpoint costs its metadata to show. inspect never imports the trainer (pipelines/ sits
below it): what it reads is named by schemas/checkpoint.py.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.inspect.formatting import located, plural, shown_path
from pipelines.inspect.targets import InspectError
from pipelines.io import storage
from pipelines.io.unpickling import load_failure, unpickling_refused
from schemas.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_GLOB,
    CHECKPOINTS_DIR,
    LATEST_FILE,
    LATEST_MAX_BYTES,
    CheckpointKey,
    KernelsKey,
    parse_latest,
)
from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.vocab import VOCAB_FILE

TORCH_MISSING = (
    "reading a checkpoint needs torch, which the core install leaves out: "
    "pip install 'bertkit[train]' (or pip install torch)"
)
_STEP_NAME = re.compile(r"step-([0-9]{8})\.pt")


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """What a path holds of a run: its checkpoint files by step, and which `latest` names."""

    directory: Path  # the checkpoints/ directory
    run: Path | None  # the run directory, when given one
    files: dict[int, Path]  # step → checkpoint file
    latest: int | None  # the step `latest` names; None without a `latest`
    chosen: int | None  # the step to describe: the one given, else latest, else the newest


def find_checkpoints(path: str) -> Checkpoints | None:
    """The checkpoints a local path holds (a run directory, its checkpoints/ directory, a
    `latest` file or one checkpoint), or None when it is none of these."""
    local = Path(path)
    given: int | None = None
    if local.is_file():
        match = _STEP_NAME.fullmatch(local.name)
        if match is None and local.name != LATEST_FILE:
            return None
        directory = local.parent
        given = int(match.group(1)) if match else None
    elif local.is_dir() and (local / CHECKPOINTS_DIR).is_dir():
        directory = local / CHECKPOINTS_DIR
    elif local.is_dir() and ((local / LATEST_FILE).is_file() or any(local.glob(CHECKPOINT_GLOB))):
        directory = local
    elif local.is_dir() and local.name == CHECKPOINTS_DIR and not any(local.iterdir()):
        directory = local  # a run's, before its first checkpoint: said as for the run
    else:
        return None
    run = directory.parent if directory.name == CHECKPOINTS_DIR else None
    files = {int(_STEP_NAME.fullmatch(p.name).group(1)): p for p in directory.glob(CHECKPOINT_GLOB)}
    latest = _latest_step(directory)
    chosen = given if given is not None else latest if latest in files else max(files, default=None)
    return Checkpoints(directory, run, dict(sorted(files.items())), latest, chosen)


def _latest_step(directory: Path) -> int | None:
    pointer = directory / LATEST_FILE
    if not pointer.is_file():
        return None
    with pointer.open("rb") as source:
        data = source.read(LATEST_MAX_BYTES + 1)
    try:
        name = parse_latest(data, str(pointer))
    except ValueError as error:
        raise InspectError(
            f"{error}; it was changed after the trainer wrote it: inspect one checkpoint file "
            "(step-NNNNNNNN.pt) instead"
        ) from error
    return int(_STEP_NAME.fullmatch(name).group(1))  # type: ignore[union-attr]


def describe_checkpoints(found: Checkpoints) -> list[str]:
    """The summary: the steps present, then what the chosen checkpoint holds."""
    if found.chosen is None:
        where = found.run or found.directory
        raise InspectError(
            f"{where} holds no checkpoint yet (no {CHECKPOINT_GLOB.replace('[0-9]', 'N')}): "
            "the run stopped before its first; --checkpoint-every sets when it writes one"
        )
    torch = _import_torch()
    lines = []
    if found.run is not None:
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in found.run.iterdir())
        lines.append(f"run directory {found.run}: {', '.join(held)}")
    lines.append(f"checkpoints {found.directory}: {plural(len(found.files), 'checkpoint')}")
    for step, path in found.files.items():
        mark = "  (latest)" if step == found.latest else ""
        lines.append(f"  {path.name}  {path.stat().st_size:,} bytes{mark}")
    if found.latest is None:
        lines.append(
            f"  no {LATEST_FILE} file: the trainer writes the newest complete checkpoint's "
            "name there, so --resume and export-hf refuse this directory as it is"
        )
    elif found.latest not in found.files:
        lines.append(f"  {LATEST_FILE} names step {found.latest}, whose file is not there")
    path = found.files.get(found.chosen) or found.directory / f"step-{found.chosen:08d}.pt"
    checkpoint = _load(torch, path)
    which = " (latest)" if found.chosen == found.latest else ""
    lines.append(f"{path.name}{which}:")
    lines += [f"  {line}" for line in _checkpoint_lines(checkpoint, found.directory)]
    return lines


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise MissingExtraError(TORCH_MISSING) from error
    return torch


class MissingExtraError(InspectError):
    """What the target needs is not installed: exit 2, before anything is read."""


def _load(torch: Any, path: Path) -> dict[str, Any]:
    try:
        # mmap: the tensors stay on disk; only the metadata is read.
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    # What torch.load raises on a file that is not a torch.save archive, or one cut short
    # (trainer/run/checkpoints.py load_checkpoint catches the same).
    except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, ValueError) as error:
        if (refused := unpickling_refused(error)) is not None:
            raise InspectError(
                f"{path} is not a bertkit checkpoint: it holds objects other than tensors and "
                f"plain containers ({refused}), so it is refused, never unpickled"
            ) from error
        raise InspectError(
            f"{path} is not a readable bertkit checkpoint (torch.load(weights_only=True): "
            f"{load_failure(error)}); it was cut short or written by another tool"
        ) from error
    found = checkpoint.get(CheckpointKey.FORMAT) if isinstance(checkpoint, dict) else None
    if found != CHECKPOINT_FORMAT:
        raise InspectError(
            f"{path} is format {found!r}, not a {CHECKPOINT_FORMAT!r} checkpoint: it was not "
            "written by this bertkit's trainer"
        )
    return checkpoint


def _checkpoint_lines(checkpoint: dict[str, Any], directory: Path) -> list[str]:
    config = checkpoint.get(CheckpointKey.TRAIN_CONFIG) or {}
    model = checkpoint.get(CheckpointKey.MODEL_CONFIG) or {}
    data = checkpoint.get(CheckpointKey.DATA) or {}
    world = int(checkpoint.get(CheckpointKey.WORLD_SIZE) or 1)
    lines = [
        f"step {checkpoint.get(CheckpointKey.STEP)} of --max-steps {config.get('max_steps')}",
        _model_line(config, model, checkpoint.get(CheckpointKey.MODEL) or {}),
        _recipe_line(config, model, data),
        _optimizer_line(config, checkpoint.get(CheckpointKey.OPTIMIZER)),
        _schedule_line(config, checkpoint.get(CheckpointKey.SCHEDULER)),
        _batch_line(config, world, checkpoint.get(CheckpointKey.NUM_WORKERS)),
        _position_line(checkpoint.get(CheckpointKey.DATA_POSITION) or {}, config, world, data),
        _shards_line(config, data, directory),
        _vocab_line(checkpoint.get(CheckpointKey.VOCAB) or {}, directory),
        f"seed {config.get('seed')}, precision {config.get('precision')}, "
        + _fp8_shown(config)
        + _kernels_shown(checkpoint.get(CheckpointKey.KERNELS) or {})
        + f"device {config.get('device')}",
    ]
    start = checkpoint.get(CheckpointKey.START) or {}
    if start.get("kind") == "released":
        # A released BERT's record (the trainer's start record): where it is now, its digests.
        path = shown_path(str(start.get("path") or ""), str(directory), start.get("config_file"))
        lines.append(
            f"started from the released BERT at {path} (config sha256 "
            f"{str(start.get('config_sha256'))[:16]}…, weights sha256 "
            f"{str(start.get('weights_sha256'))[:16]}…)"
        )
    elif config.get("init_checkpoint"):
        lines.append(f"started from --init-checkpoint {config['init_checkpoint']}")
    return lines


def _fp8_shown(config: dict[str, Any]) -> str:
    """`--fp8` where the step's run took it ("fp8 rowwise (--fp8-layers all), "); nothing
    for a run without it, or one from before the flag."""
    recipe = config.get("fp8", "off")
    if recipe == "off":
        return ""
    return f"fp8 {recipe} (--fp8-layers {config.get('fp8_layers')}), "


def _kernels_shown(record: dict[str, Any]) -> str:
    """bertkit's Triton kernels where the run took them ("--ffn-epilogue and --add-norm
    kernels taken (on NVIDIA H100 80GB HBM3), "); nothing where it took none, or from before
    the record (schemas/checkpoint.py KernelsKey)."""
    levers = ((KernelsKey.FFN_EPILOGUE, "--ffn-epilogue"), (KernelsKey.ADD_NORM, "--add-norm"))
    taken = [flag for key, flag in levers if record.get(key)]
    if not taken:
        return ""
    return f"{' and '.join(taken)} kernels taken (on {record.get(KernelsKey.DEVICE)}), "


def _model_line(config: dict[str, Any], model: dict[str, Any], weights: dict[str, Any]) -> str:
    # Tied weights (the MLM decoder and the word embeddings) share one storage: count it once.
    seen, parameters = set(), 0
    for tensor in weights.values():
        storage = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape)
        if storage not in seen:
            seen.add(storage)
            parameters += tensor.numel()
    return (
        f"model: {config.get('model', '?')}, {model.get('num_hidden_layers')} layers × "
        f"{model.get('hidden_size')} hidden, {model.get('num_attention_heads')} heads, "
        f"{model.get('intermediate_size')} intermediate, {model.get('vocab_size'):,} token ids, "
        f"{model.get('max_position_embeddings')} positions, {parameters:,} parameters"
    )


def _recipe_line(config: dict[str, Any], model: dict[str, Any], data: dict[str, Any]) -> str:
    # Absent in checkpoints written before the field existed: what those runs trained.
    objective = model.get("objective", "mlm+nsp")
    masking = data.get("masking", "static")
    line = f"recipe: {objective}, {masking} masking"
    if masking == "dynamic":
        whole = ", whole words" if config.get("whole_word_mask") else ""
        most = config.get("max_predictions")
        line += (
            f" (rate {config.get('mask_rate')}, {config.get('mask_replace')} [MASK]/kept/"
            f"random{whole}, at most {most if most is not None else 'the default'} a sequence)"
        )
    else:
        line += " (the masks stored in the shards)"
    return line


def _optimizer_line(config: dict[str, Any], state: Any) -> str:
    line = (
        f"optimizer: {config.get('optimizer')}, lr {config.get('lr')}, weight decay "
        f"{config.get('weight_decay')}, betas {config.get('beta1')}/{config.get('beta2')}, eps "
        f"{config.get('eps')}, clip grad norm {config.get('clip_grad_norm')}"
    )
    if not isinstance(state, dict):
        return line + "; no optimizer state (an export-only checkpoint)"
    groups = state.get("param_groups") or [{}]
    return line + f"; lr now {groups[0].get('lr', '?'):.6g}"


def _schedule_line(config: dict[str, Any], scheduler: Any) -> str:
    # The schedule as the scheduler ran it (its state holds the factor's settings), else as
    # the flags give it.
    lambdas = scheduler.get("lr_lambdas") if isinstance(scheduler, dict) else None
    ran = lambdas[0] if isinstance(lambdas, list) and lambdas else None
    if isinstance(ran, dict) and {"warmup_steps", "total_steps", "power"} <= set(ran):
        warmup, total, power = ran["warmup_steps"], ran["total_steps"], ran["power"]
    else:
        warmup, total = config.get("warmup_steps"), config.get("max_steps")
        power = config.get("decay_power")
    shape = "linear" if power == 1.0 else f"power {power}"
    return (
        f"schedule: linear warmup over {plural(warmup, 'step') if isinstance(warmup, int) else '?'}"
        f" to lr {config.get('lr')}, then {shape} decay to 0 at step {total}"
    )


def _global_batch(config: dict[str, Any], world: int) -> int:
    # The trainer's rule (trainer/run/checkpoints.py global_batch), which pipelines/ cannot import.
    return int(config.get("global_batch_size") or config.get("micro_batch_size", 0) * world)


def _batch_line(config: dict[str, Any], world: int, workers: Any) -> str:
    micro = int(config.get("micro_batch_size", 0))
    batch = _global_batch(config, world)
    accumulated = batch // (micro * world) if micro else 0
    processes = f"{world} process" + ("" if world == 1 else "es")
    return (
        f"batch: {batch:,} sequences a step (micro-batch {micro} × {processes} × "
        f"{accumulated} accumulated); world size {world}, {workers} loader workers a process"
    )


def _position_line(
    position: dict[str, Any], config: dict[str, Any], world: int, data: dict[str, Any]
) -> str:
    epoch = position.get("epoch", 0)
    per_epoch = data.get("samples_per_epoch")
    of = f" of {per_epoch:,}" if isinstance(per_epoch, int) else ""
    if "global_batches" in position:
        batches = int(position["global_batches"])
        samples = batches * _global_batch(config, world)
        global_batches = f"{batches:,} global batch" + ("" if batches == 1 else "es")
        return (
            f"data position: epoch {epoch}, {global_batches} consumed in it "
            f"({samples:,}{of} samples)"
        )
    return (
        f"data position: epoch {epoch}, {position.get('batches')} micro-batches a process (a "
        f"checkpoint from before elastic resume: it goes on only with {world} processes)"
    )


def _shards_line(config: dict[str, Any], data: dict[str, Any], directory: Path) -> str:
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        return _one_shards_line("shards", config, data, directory)
    # A mix: its --mix, then each source on its own line (the caller indents by two).
    lines = [f"shards: a mix of {len(sources)} sources, --mix {data.get('mix')}"]
    for source in sources:
        label = f"{source.get('name')} ({source.get('weight')})"
        lines.append("  " + _one_shards_line(label, {}, source, directory))
    return "\n  ".join(lines)


def _one_shards_line(
    label: str, config: dict[str, Any], data: dict[str, Any], directory: Path
) -> str:
    # The trainer records the manifest file: looked up as its directory is.
    recorded = str(data.get("manifest") or config.get("shards") or "")
    manifest = storage.redact(recorded)
    if storage.basename(recorded) == SHARDS_MANIFEST_NAME and not storage.is_url(recorded):
        shards = located(storage.parent(recorded), str(directory), SHARDS_MANIFEST_NAME)
        found = storage.join(shards, SHARDS_MANIFEST_NAME) if shards is not None else None
        manifest = found or f"{recorded} (not there now)"
    digest = str(data.get("shards_sha256", ""))
    return (
        f"{label}: {manifest} (seq{data.get('max_seq_length')}, schema "
        f"{data.get('schema_version')}, {plural(int(data.get('shards', 0)), 'shard')}, "
        f"digest {digest[:16]}…)"
    )


def _vocab_line(vocab: dict[str, Any], directory: Path) -> str:
    path = shown_path(str(vocab.get("path") or ""), str(directory), VOCAB_FILE)
    size = vocab.get("size")
    if not isinstance(size, int):
        return f"vocabulary: {path}"
    cased = "cased" if vocab.get("cased") else "uncased"
    digest = str(vocab.get("sha256", ""))[:16]
    return f"vocabulary: {path} ({size:,} tokens, {cased}, sha256 {digest}…)"
