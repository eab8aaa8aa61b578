"""The trainer's checkpoint file: `CHECKPOINT_DIR/step-00001000.pt`, one per save.

Written with `torch.save` (temp file + rename) and read with `torch.load(weights_only=True)`,
so it holds only tensors and plain containers of str/int/float/bool/None: no pickled classes.

    format             CHECKPOINT_FORMAT
    step               optimizer steps taken
    model_config       trainer.model.BertConfig as a dict (asdict); its "objective",
                       "mlm+nsp" or "mlm", is absent in older checkpoints: "mlm+nsp"
    model              the model's state_dict (unwrapped from DDP and torch.compile)
    optimizer          the optimizer's state_dict (absent in an export-only checkpoint)
    scheduler          the LR scheduler's state_dict
    data_position      trainer.data.DataPosition as a dict: {"epoch", "global_batches"}, the
                       global batches consumed in the epoch, the same for any world size
                       (trainer/order.py); a checkpoint written before elastic resume has
                       {"epoch", "batches"}, one rank's micro-batches, and goes on only
                       with its world size (trainer/run/checkpoints.py check_resumable)
    rng                {"torch": [ByteTensor per rank], "device_type": "cpu" | "cuda" | "xpu"…,
                        "device": [ByteTensor per rank] | None (the accelerator's generator),
                        "cuda": the same as "device" on CUDA, else None (older readers)};
                       a resume on another world size seeds each rank from (seed, rank, step)
    train_config       trainer.config.TrainConfig as a dict: every flag, resolved
    data               {"manifest", "schema_version", "max_seq_length", "samples_per_epoch",
                        "shards", "shards_sha256", "masking"}: what the run reads, "manifest"
                        relative to the checkpoint's directory as "vocab" is; the digest
                        is the sha256 of [split, [[path, samples, bytes, sha256] per shard]]
                        as JSON, so --resume refuses shards rebuilt under the same path;
                        "masking" the resolved "static" or "dynamic" (absent: static).
                        A mix (several --shards) adds "mix", the normalised shares in
                        --shards order ("0.7,0.3"), and "sources", one such record per
                        source with its "name" and "weight"; its counts are their sums,
                        its digest the sha256 of their digests in order, its "manifest"
                        the first source's. train_config's "shards" is a string for one
                        source (as before mixes), a list for several
    vocab              the shards manifest's vocab record: {"path", "sha256", "size", "cased"},
                       its path relative to the checkpoint's directory ("../../vocab"; older
                       checkpoints copied the manifest's, relative to where `examples` ran)
    world_size         processes in the run that wrote it: with train_config, its global
                       batch, which a resume needs the same (on any number of processes)
    num_workers        loader workers per process (a record: a resume may use others)
    grad_scaler        an fp16 run's loss scaling (torch.amp.GradScaler.state_dict():
                       {"scale", "growth_factor", "backoff_factor", "growth_interval",
                       "_growth_tracker"}, floats and ints); absent in bf16 and fp32 runs
    kernels            the layers' kernels the run took at its start (trainer/levers.py):
                       {"device": the GPU's name (`torch.cuda.get_device_name`) or "cpu",
                        "ffn_epilogue", "add_norm": bools}; a resume on that kind of device
                       takes them again where --ffn-epilogue or --add-norm is auto, untimed,
                       so it goes on as the run began (absent in older checkpoints)
    start              what the run started from, where not a new model (absent in older
                       checkpoints): {"kind": "released", "path" (relative as "vocab"'s),
                       "config_file", "config_sha256", "weights_sha256", "tokenizer_files"
                       {name: sha256}, "config" (its config.json)} for a released BERT

`latest` in the same directory names the newest complete checkpoint file (written after it).
"""

from __future__ import annotations

import re

CHECKPOINT_FORMAT = "bertkit-checkpoint-1"
LATEST_FILE = "latest"


CHECKPOINTS_DIR = "checkpoints"  # in the run directory
CHECKPOINT_GLOB = "step-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9].pt"


_CHECKPOINT_NAME = re.compile(r"step-[0-9]{8}\.pt")
LATEST_MAX_BYTES = 64  # "step-NNNNNNNN.pt\n" and nothing else


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def parse_latest(data: bytes, where: str) -> str:
    """The checkpoint name a `latest` file holds: a bare `step-NNNNNNNN.pt` in the same
    directory, never a path; anything else is a ValueError naming the file."""
    text = data.decode("utf-8", errors="replace").strip()
    if len(data) > LATEST_MAX_BYTES or not _CHECKPOINT_NAME.fullmatch(text):
        raise ValueError(
            f"{where} holds {text[:80]!r}, not the name of a checkpoint beside it "
            "(step-NNNNNNNN.pt)"
        )
    return text


class CheckpointKey:
    FORMAT = "format"
    STEP = "step"
    MODEL_CONFIG = "model_config"
    MODEL = "model"
    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    DATA_POSITION = "data_position"
    RNG = "rng"
    TRAIN_CONFIG = "train_config"
    DATA = "data"
    VOCAB = "vocab"
    WORLD_SIZE = "world_size"
    NUM_WORKERS = "num_workers"
    START = "start"
    GRAD_SCALER = "grad_scaler"
    KERNELS = "kernels"


class KernelsKey:
    """The fields of a checkpoint's `kernels` record."""

    DEVICE = "device"
    FFN_EPILOGUE = "ffn_epilogue"
    ADD_NORM = "add_norm"
