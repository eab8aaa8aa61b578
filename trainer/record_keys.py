"""BERTKIT_RECORD_KEYS=DIR (a debugging aid, off by default): each rank appends a JSON line
per training micro-batch its loader hands out to DIR/keys-rank-NNNNN.jsonl:

    {"epoch", "global_batch", "step" (a), "rank", "world_size", "keys"}

"keys" being the sample keys (RawSample.index) in the batch's order; a mix's micro-batch
(trainer/mix.py) has "sources" beside them, each key's source number (tests/test_elastic.py,
tests/test_mix_loader.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import torch

from schemas.batch import BatchField
from trainer.collate import SAMPLE_SOURCE

if TYPE_CHECKING:  # types only: trainer.data imports this module
    from trainer.data import LoaderConfig

RECORD_KEYS_ENV = "BERTKIT_RECORD_KEYS"


class KeyRecord:
    """A rank's record. Line-buffered: a killed run leaves whole lines."""

    def __init__(self, directory: Path, config: LoaderConfig) -> None:
        self.path = directory / f"keys-rank-{config.rank:05d}.jsonl"
        self.config = config
        self._file: TextIO | None = None

    @classmethod
    def from_environment(cls, config: LoaderConfig) -> KeyRecord | None:
        directory = os.environ.get(RECORD_KEYS_ENV)
        return cls(Path(directory), config) if directory and config.drop_last else None

    def write(self, epoch: int, index: int, batch: dict[str, torch.Tensor]) -> None:
        """Micro-batch `index` of this rank in `epoch` (counted from the epoch's start)."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8", buffering=1)
        global_batch, step = divmod(index, self.config.accumulation)
        line = {
            "epoch": epoch,
            "global_batch": global_batch,
            "step": step,
            "rank": self.config.rank,
            "world_size": self.config.world_size,
            "keys": batch[BatchField.SAMPLE_INDEX].tolist(),
        }
        if SAMPLE_SOURCE in batch:
            line["sources"] = batch[SAMPLE_SOURCE].tolist()
        self._file.write(json.dumps(line) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
