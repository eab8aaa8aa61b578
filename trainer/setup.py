"""A training run's set-up: the model, its DDP wrapper, the optimizer and schedule, the
loader and the meters, built in an order that refuses bad flags and bad data before any work,
and restored from a checkpoint on --resume (trainer/run/start.py; trainer/train.py runs the
loop).

`setup` opens the run directory (trainer/run/directory.py: rank 0 takes its lock before it
looks at the directory) and closes it if anything after fails; the `Run` it returns holds it
until trainer/train.py ends the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from pipelines.command.flags import flag_name
from pipelines.io import storage
from schemas.checkpoint import CheckpointKey
from trainer import distributed
from trainer.collate import FixedShape  # the trainer's compile padding
from trainer.compiling import compiled
from trainer.config import DROPOUT_FIELDS, TrainConfig, accumulation_steps, dropout_overrides
from trainer.data import (
    DataConfigError,
    DataSource,
    LoaderConfig,
    PretrainingLoader,
    check_source,
    open_source,
)
from trainer.fp8 import fp8_problem
from trainer.levers import choose_kernels, device_kind, set_levers
from trainer.metrics import MetricsLogger, ProgressLine, ThroughputMeter, peak_flops
from trainer.mix import MixedSource
from trainer.model import (
    BertConfig,
    BertForPreTraining,
    config_for,
    shape_problem,
    without_nsp_head,
)
from trainer.optim import build_optimizer, warmup_decay_schedule
from trainer.order import shuffle_note
from trainer.precision import (
    COMPUTE_DTYPE,
    LossScaler,
    autocast_for,
    loss_scaler,
    resolve_precision,
)
from trainer.recipe import (
    DEFAULT_RECIPE,
    Recipe,
    checkpoint_vocab_record,
    resolve_recipe,
    shards_vocab_dir,
)
from trainer.released import (
    Released,
    check_shards,
    released_model,
    released_model_config,
    start_line,
    start_record,
)
from trainer.run.directory import RunDirectory
from trainer.run.start import restore, start_from
from trainer.source import (
    check_mix_sources,
    heldout_source,
    log_mix,
    resumed_names,
    source_names,
)

_LOG = logging.getLogger("bertkit.train")


@dataclass
class Run:
    """What set-up builds and the loop uses: one run's model, data, optimizer and meters."""

    config: TrainConfig
    env: distributed.Distributed
    source: DataSource
    heldout: DataSource | None
    model: BertForPreTraining
    wrapped: torch.nn.Module  # DDP around the model, or the model
    forward: Callable[..., Any]  # `wrapped`, compiled or not
    eval_forward: Callable[..., Any] | None  # `model` compiled for evaluation, or None
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loader: PretrainingLoader
    batches: Iterator[dict[str, torch.Tensor]]
    autocast: contextlib.AbstractContextManager
    accumulation: int  # micro-batches per optimizer step
    pad_to: FixedShape | None  # the shape every batch is padded to (torch.compile), or None
    step: int  # optimizer steps done
    directory: RunDirectory  # --output: its lock, checkpoints, bucket mirror
    logger: MetricsLogger
    progress: ProgressLine
    meter: ThroughputMeter
    data: dict[str, Any] | None = None  # data_record(source), made once by setup
    vocab_record: dict[str, Any] = field(default_factory=dict)  # checkpoint_vocab_record's
    recipe: Recipe = DEFAULT_RECIPE  # the objective and masking, resolved (trainer/recipe.py)
    # A mix (several --shards): its sources, each one's share by name in --shards order,
    # and the held-out split of each source that has one; None and empty for one source.
    mix: MixedSource | None = None
    weights: dict[str, float] = field(default_factory=dict)
    heldouts: dict[str, DataSource] = field(default_factory=dict)
    # What the run started from, where its checkpoints record it: a released BERT's record
    # (trainer/released.py start_record), kept by a resume and by a run started from them.
    start: dict[str, Any] | None = None
    # --precision resolved on the device (trainer/precision.py), and fp16's loss scaler.
    precision: str = "fp32"
    scaler: LossScaler | None = None
    # What --ffn-epilogue and --add-norm took (trainer/levers.py), for the checkpoint.
    kernels: dict[str, Any] | None = None


def setup(config: TrainConfig, env: distributed.Distributed) -> Run:
    """Data, model, optimizer and meters, restored from a checkpoint on --resume.

    The order matters: bad flags stop before any work, the data is checked against the model
    before any step, and a resumed run's generator states replace the seeded ones only after
    the model's initialisation has drawn from them."""
    accumulation = accumulation_steps(config, env.world_size)
    precision = resolve_precision(config.precision, env.device, main=env.is_main)  # or refused
    if fp8_refused := fp8_problem(config.fp8, precision, env.device):
        raise ValueError(fp8_refused)
    directory = RunDirectory.open(
        config.output, config.shards, config.keep_checkpoints, main=env.is_main
    )
    try:
        return _setup(config, env, accumulation, precision, directory)
    except BaseException:
        directory.close()  # its staging directory and lock: nothing else would
        raise


def _setup(
    config: TrainConfig,
    env: distributed.Distributed,
    accumulation: int,
    precision: str,
    directory: RunDirectory,
) -> Run:
    directory.prepare(config.resume, config.overwrite, env.is_main)
    torch.manual_seed(config.seed + env.rank)  # dropout differs per rank, reproducibly
    if env.device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # Leave the loader workers their cores: with torch's default (every core) and a
        # worker beside it, OpenMP threads spin-wait on each other while a worker holds one.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - config.num_workers))
    # A mix's sources, each opened as one source is, named for metrics and checked to agree
    # (trainer/source.py); the first stands for all where they agree (vocabulary, recipe).
    names = source_names(config.shards)
    sources = tuple(open_source(spec, "train", config.max_seq_length) for spec in config.shards)
    source = sources[0]
    vocab_size = _vocab_size(source)
    mixed = len(sources) > 1
    if mixed:
        check_mix_sources(sources, names)
    recipe = resolve_recipe(config, source)  # objective and masking, refused if they can't work
    # What the run reads, and how it masks it: checked on --resume, in every checkpoint.
    weights = dict(zip(names, config.weights, strict=True))
    data = {**data_record(source, sources, weights), "masking": recipe.masking}
    started, config = start_from(config, env, directory, data, precision)
    resumed, init = started.resumed, started.weights
    # A resumed mix's sources keep the names its metrics know them by, however --shards
    # spells their paths now.
    saved_data = resumed.get(CheckpointKey.DATA) if resumed is not None else None
    if mixed and (kept := resumed_names(saved_data, data, config.shards, env.is_main)):
        names, weights = kept, dict(zip(kept, config.weights, strict=True))
        data = {**data_record(source, sources, weights), "masking": recipe.masking}
    if mixed and env.is_main:
        log_mix(sources, names, config.weights)
    heldouts = {
        name: heldout
        for name, each in zip(names, sources, strict=True)
        if (heldout := heldout_source(each, name if mixed else None, env.is_main)) is not None
    }
    heldout = None if mixed else heldouts.get(names[0])
    mix = MixedSource(sources, names, config.weights) if mixed else None
    if started.released is not None:
        # Its vocabulary, casing, accent stripping and token types against the shards'.
        check_shards(started.released, source, config.vocab or shards_vocab_dir(source))
        model = _released_model(config, env, source, started.released, recipe.objective)
        start = start_record(started.released, directory.checkpoints_url)
    else:
        model = _build_model(config, env, source, vocab_size, init, recipe.objective, bool(resumed))
        start = init.get(CheckpointKey.START) if init else None
    # How the step runs: --unpad, --fp8 (the weights unchanged).
    set_levers(model, config, env, COMPUTE_DTYPE[precision])
    # Once every check has passed: --overwrite's earlier run files, or the temporaries of a
    # checkpoint write that a kill cut short before --resume.
    directory.clear_earlier(env.is_main)
    distributed.barrier(env)
    optimizer = _build_optimizer(config, env, model)
    step, position = restore(env, resumed, optimizer)
    # Built from this run's flags at the step it starts from, never restored: a resume with
    # a new --max-steps, --warmup-steps, --decay-power or --lr follows them from there on.
    scheduler = warmup_decay_schedule(
        optimizer,
        config.warmup_steps,  # type: ignore[arg-type]  # resolved: never None here
        config.max_steps,
        config.decay_power,
        step=step,
        peak_lr=config.lr,
    )
    if config.warmup_steps == config.max_steps and env.is_main:  # never at the peak
        message = "--warmup-steps equals --max-steps %d: the run ends before its lr reaches %g"
        _LOG.warning(message, config.max_steps, config.lr)
    wrapped: torch.nn.Module = model
    if env.active:
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=device_ids)
    # Bucketed batches come in four widths: four static graphs, not one dynamic one.
    dynamic = None if config.bucket_window == 0 else False
    forward, eval_forward = wrapped, None
    if config.compile:
        # Inductor's caches in OUTPUT/compile-cache, before the first compilation: a
        # requeued job (--resume here) loads what this one compiles and tunes.
        cache = directory.open_compile_cache(env.is_main)
        if env.is_main:
            _LOG.info(cache.line())
    # --ffn-epilogue, --add-norm: under auto timed on the device (trainer/levers.py).
    kernels = choose_kernels(
        model,
        config,
        env,
        COMPUTE_DTYPE[precision],
        source.max_seq_length,
        resumed.get(CheckpointKey.KERNELS) if resumed is not None else None,
    )
    if config.compile:
        forward = compiled(wrapped, config.compile_mode, dynamic)
        # Evaluation runs the bare model (no DDP hooks): compiled on its own, in eval mode.
        eval_forward = compiled(model, config.compile_mode, dynamic)
    autocast = autocast_for(precision, env.device)
    scaler = loss_scaler(precision, env.device)
    if scaler is not None and resumed is not None and CheckpointKey.GRAD_SCALER in resumed:
        scaler.load_state_dict(resumed[CheckpointKey.GRAD_SCALER])
    loader = _build_loader(config, env, sources, mix, recipe)
    run = Run(
        config=config,
        data=data,
        vocab_record=checkpoint_vocab_record(
            source, directory.checkpoints_url, config.vocab, say=env.is_main
        ),
        env=env,
        source=source,
        heldout=heldout,
        model=model,
        wrapped=wrapped,
        forward=forward,
        eval_forward=eval_forward,
        optimizer=optimizer,
        scheduler=scheduler,
        loader=loader,
        batches=loader.batches(position),
        autocast=autocast,
        accumulation=accumulation,
        pad_to=_fixed_shape(config, source, recipe) if config.compile else None,
        step=step,
        directory=directory,
        logger=MetricsLogger(
            directory.path,
            enabled=env.is_main,
            tensorboard=config.tensorboard,
            purge_step=step + 1,
        ),
        progress=ProgressLine(config.max_steps, every=config.log_every, enabled=env.is_main),
        meter=ThroughputMeter(peak_flops(env.device, precision, config.peak_tflops)),
        recipe=recipe,
        mix=mix,
        weights=weights if mixed else {},
        heldouts=heldouts if mixed else {},
        start=start,
        precision=precision,
        scaler=scaler,
        kernels=kernels,
    )
    _log_setup(run)
    return run


def _fixed_shape(config: TrainConfig, source: DataSource, recipe: Recipe) -> FixedShape:
    """The sequence lengths and prediction slots of batches under --compile: the manifest's
    (or its quarters, with --bucket-window; with dynamic masking, the most predictions its
    rule makes at that length), so that no batch brings a new shape and a recompile."""
    output = source.output
    assert output is not None  # checked by open_source
    buckets = 4 if config.bucket_window else 1
    predictions = output.max_predictions_per_seq
    if recipe.dynamic is not None:
        predictions = recipe.dynamic.max_predictions_for(source.max_seq_length)
    return FixedShape.of(source.max_seq_length, predictions, buckets)


def _vocab_size(source: DataSource) -> int:
    if source.manifest is None:
        first = storage.redact(source.shards[0].url)
        if storage.query_of(source.shards[0].url):
            raise DataConfigError(
                f"{first}: a shard URL with a query (presigned) is read without a manifest, "
                "and the trainer takes the vocabulary's size and sha256 from one. Give the "
                "shards directory on s3://, gs:// or http(s):// instead"
            )
        raise DataConfigError(
            f"{first}: no manifest.json found three levels up; the trainer "
            "takes the vocabulary's size and sha256 from it. Give the shards directory, or "
            "keep manifest.json where `bertkit examples` wrote it"
        )
    return int(source.manifest.vocab["size"])


def _build_model(
    config: TrainConfig,
    env: distributed.Distributed,
    source: DataSource,
    vocab_size: int,
    init: dict[str, Any] | None,
    objective: str,
    resumed: bool,
) -> BertForPreTraining:
    """The model on the device, with `init`'s weights if given, once the shards are known to
    fit it (sequence length, vocabulary size, and the checkpoint's vocabulary sha256) and its
    heads the run's objective: an mlm+nsp checkpoint starts an mlm run without its pooler and
    NSP head (a logged note); an mlm one never starts an mlm+nsp run (no NSP head to go on
    with), and --resume never changes the objective (the optimizer state has the other heads).
    """
    saved = init[CheckpointKey.MODEL_CONFIG].get("objective", "mlm+nsp") if init else objective
    model_config = _model_config(
        config, vocab_size, init[CheckpointKey.MODEL_CONFIG] if init else None, objective, source
    )
    if resumed and env.is_main:
        _log_dropout_change(init, model_config)
    preset = BertConfig.max_position_embeddings
    raised = init is None and config.max_position_embeddings is None
    if raised and model_config.max_position_embeddings > preset and env.is_main:
        _LOG.info(
            "%s: sequences of up to %d tokens, more than the preset's %d positions: the "
            "model gets %d (--max-position-embeddings)",
            storage.redact(source.manifest_url or source.shards[0].url),
            source.max_seq_length,
            preset,
            model_config.max_position_embeddings,
        )
    vocab_sha = init[CheckpointKey.VOCAB].get("sha256") if init else None
    check_source(source, model_config.max_position_embeddings, model_config.vocab_size, vocab_sha)
    weights = init[CheckpointKey.MODEL] if init else None
    if init is not None and saved != objective:
        output = storage.redact(config.output)
        if resumed:  # the run's own checkpoint, not --init-checkpoint's
            hint = (
                ", or start a new run from it with --init-checkpoint" if saved == "mlm+nsp" else ""
            )
            raise ValueError(
                f"--resume: the run in {output} trains --objective {saved}, this one "
                f"{objective}: a resume goes on with its objective; pass --objective {saved}{hint}"
            )
        if saved == "mlm":
            raise ValueError(
                f"--init-checkpoint {storage.redact(str(config.init_checkpoint))} holds an "
                "--objective mlm model, with no pooler or NSP head for --objective mlm+nsp to "
                "go on with: train on from it with --objective mlm"
            )
        weights = without_nsp_head(weights)
        if env.is_main:
            _LOG.info(
                "--init-checkpoint: its mlm+nsp model starts this --objective mlm run without "
                "its pooler and NSP head"
            )
    if weights is not None and (problem := shape_problem(model_config, weights)):
        raise ValueError(f"the checkpoint's model_config says {problem}")
    model = BertForPreTraining(model_config).to(env.device)  # draws the initial weights
    if weights is not None:
        model.load_state_dict(weights)
    return model


def _released_model(
    config: TrainConfig,
    env: distributed.Distributed,
    source: DataSource,
    released: Released,
    objective: str,
) -> BertForPreTraining:
    """The model on the device with a released BERT's weights (trainer/released.py): its
    architecture, checked against the shards and --max-position-embeddings; the heads it
    lacks keep the seed's draw, the log names them."""
    dropout = dropout_overrides(config)
    model_config = released_model_config(released, objective, dropout)
    flag, saved = config.max_position_embeddings, model_config.max_position_embeddings
    if flag is not None and flag != saved:
        raise ValueError(
            f"--max-position-embeddings {flag}: the released BERT at {released.directory} has "
            f"{saved} positions, and a model started from one keeps its own; leave the flag out"
        )
    check_source(source, saved, model_config.vocab_size, None)  # its vocabulary: checked
    # The one way a released model becomes bertkit's, which the parity test runs too.
    model, fresh, dropped = released_model(released, objective, dropout)
    if env.is_main:
        _LOG.info(start_line(released, model_config, fresh, dropped))
    return model.to(env.device)


def _log_dropout_change(checkpoint: dict[str, Any], model_config: BertConfig) -> None:
    """--resume with other dropout rates than the checkpoint's model had: allowed (they
    shape no weight and no optimizer state: a run may end without dropout), in one line."""
    saved = checkpoint[CheckpointKey.MODEL_CONFIG]
    changes = [
        f"{flag_name(flag)} {saved[name]:g} → {getattr(model_config, name):g}"
        for flag, name in DROPOUT_FIELDS.items()
        if saved[name] != getattr(model_config, name)
    ]
    if changes:
        step = checkpoint[CheckpointKey.STEP] + 1
        _LOG.info(
            "--resume: from step %d on, dropout follows this run's flags: %s",
            step,
            ", ".join(changes),
        )


def _model_config(
    config: TrainConfig,
    vocab_size: int,
    init: dict[str, Any] | None,
    objective: str,
    source: DataSource,
) -> BertConfig:
    """The run's BertConfig: the checkpoint's architecture (phase 2, resume) or --model's,
    with the dropout flags' rates (a rate no flag sets is the checkpoint's, or the
    preset's), and the heads of `objective` (trainer/model.py).

    A new model's positions: --max-position-embeddings, or by default the preset's 512
    raised to the shards' sequence length where that is longer (`examples
    --max-seq-length 1024` shards train as they are); an explicit value under the shards'
    length is refused. A checkpoint's model keeps its own positions (its position
    embeddings are trained): a flag that says otherwise is refused."""
    flag = config.max_position_embeddings
    length = source.max_seq_length
    if init is not None:
        saved = init.get("max_position_embeddings", BertConfig.max_position_embeddings)
        if flag is not None and flag != saved:
            raise ValueError(
                f"--max-position-embeddings {flag}: the checkpoint's model has {saved} "
                "positions, and a model started from a checkpoint keeps its own; leave the "
                "flag out"
            )
    elif flag is not None and length is not None and flag < length:
        where = storage.redact(source.manifest_url or source.shards[0].url)
        raise ValueError(
            f"--max-position-embeddings {flag} is less than the shards' sequence length "
            f"{length} ({where}): pass at least {length}, or leave it out (default: 512, or "
            "the shards' length where longer)"
        )
    overrides: dict[str, float | str] = {"objective": objective, **dropout_overrides(config)}
    if init is not None:  # phase 2 and resume: the architecture is the checkpoint's
        return BertConfig(**{**init, **overrides})
    positions = flag or max(BertConfig.max_position_embeddings, length or 0)
    return config_for(config.model, vocab_size, max_position_embeddings=positions, **overrides)


# Where torch.optim.AdamW has a fused kernel: the trainer uses it there, so CPU runs (the
# tests) take the path GPU runs take.
FUSED_ADAMW_DEVICES = ("cuda", "cpu")


def _build_optimizer(
    config: TrainConfig, env: distributed.Distributed, model: BertForPreTraining
) -> torch.optim.Optimizer:
    """The optimizer (AdamW's fused kernel, on CUDA and CPU alike)."""
    return build_optimizer(
        model,
        config.optimizer,
        config.lr,
        config.weight_decay,
        (config.beta1, config.beta2),
        config.eps,
        fused=config.optimizer == "adamw" and env.device.type in FUSED_ADAMW_DEVICES,
    )


def _build_loader(
    config: TrainConfig,
    env: distributed.Distributed,
    sources: tuple[DataSource, ...],
    mix: MixedSource | None,
    recipe: Recipe,
) -> PretrainingLoader:
    """This rank's share of the train split, in micro-batches: of the one source, or of the
    mix of several in --mix's proportions (trainer/mix.py)."""
    return PretrainingLoader(
        mix or sources[0],
        LoaderConfig(
            config.micro_batch_size,
            rank=env.rank,
            world_size=env.world_size,
            accumulation=accumulation_steps(config, env.world_size),
            num_workers=config.num_workers,
            seed=config.seed,
            shuffle_buffer=config.shuffle_buffer,
            bucket_window=config.bucket_window,
            pin_memory=env.device.type == "cuda",
            pad_to=_fixed_shape(config, sources[0], recipe) if config.compile else None,
            masking=recipe.dynamic,
        ),
    )


def _log_setup(run: Run) -> None:
    if run.env.is_main:
        config, env = run.config, run.env
        global_batch = config.micro_batch_size * run.accumulation * env.world_size
        _LOG.info(
            "%s: %s, %d parameters; %d train samples, %d batches/epoch/rank; %d processes × "
            "%d micro-batches of %d = %d sequences per step; on %s",
            *(config.output, config.model, sum(p.numel() for p in run.model.parameters())),
            (run.mix or run.source).samples,  # a mix: all its sources'
            *(run.loader.batches_per_epoch, env.world_size, run.accumulation),
            *(config.micro_batch_size, global_batch, device_shown(env.device)),
        )
        if note := shuffle_note(config.shuffle_buffer, global_batch, resumed=run.step > 0):
            _LOG.warning(note)


def device_shown(device: torch.device) -> str:
    """The device as the set-up line names it: `cpu`, or `cuda:0 (NVIDIA H100 80GB HBM3)`, so
    a GPU user's first line says which GPU the run took (docs/gpu.md)."""
    if device.type != "cuda":
        return str(device)
    return f"{device} ({device_kind(device)})"


def data_record(
    source: DataSource,
    sources: tuple[DataSource, ...] = (),
    weights: dict[str, float] | None = None,
) -> dict[str, Any]:
    """What data a run reads, for its checkpoints and --resume's check: the manifest, the
    sequence length, the counts and a digest of every shard (path, samples, bytes, sha256,
    in the manifest's order), so shards rebuilt under the same path are told apart.

    A mix (several `sources`, `weights` by name in the same order) records each source so,
    with its name and share, under "sources", and "mix", the shares in order; the top-level
    counts are the sum of the sources', the digest one of theirs in order."""
    if len(sources) > 1:
        assert weights is not None
        records = [
            {"name": name, "weight": weight, **data_record(each)}
            for each, (name, weight) in zip(sources, weights.items(), strict=True)
        ]
        digests = [record["shards_sha256"] for record in records]
        return {
            **data_record(source),
            "samples_per_epoch": sum(record["samples_per_epoch"] for record in records),
            "shards": sum(record["shards"] for record in records),
            "shards_sha256": hashlib.sha256(json.dumps(digests).encode()).hexdigest(),
            "mix": ",".join(f"{weight:.6g}" for weight in weights.values()),
            "sources": records,
        }
    assert source.manifest is not None  # the trainer needs one (_vocab_size)
    shards = [
        [s.info.path, s.info.samples, s.info.bytes, s.info.sha256] if s.info else [s.url]
        for s in source.shards
    ]
    digest = hashlib.sha256(json.dumps([source.split, shards]).encode()).hexdigest()
    return {
        "manifest": storage.redact(source.manifest_url or ""),
        "schema_version": source.manifest.schema_version,
        "max_seq_length": source.max_seq_length,
        "samples_per_epoch": source.samples,
        "shards": len(source.shards),
        "shards_sha256": digest,
    }
