"""Held-out evaluation: MLM loss and accuracy, NSP accuracy (a model with the NSP head only);
and the unigram baseline.

The held-out sequences evaluated are the split's first N in stored order (all of them by
default; N = --eval-batches × --micro-batch-size in the trainer), whatever the number of
processes: each rank reads its own contiguous part of them (the ranks within one batch of
each other), sums losses and counts, and one all-reduce at the end makes the totals (sums,
not averages of per-rank averages), so the metrics are a function of the model and those
sequences only. No per-batch collective, so uneven parts cannot hang.

The baseline an MLM must beat: always predict the token most often masked in the training
split. On the demo's sample that is "the" (id 1996 in an uncased 30k vocab; whatever id the
8,000-token demo vocab gives it), right for ~6 % of held-out predictions.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from schemas.batch import BatchField
from trainer.collate import FixedShape
from trainer.data import (
    DataPosition,
    DataSource,
    LoaderConfig,
    PretrainingLoader,
    RetryPolicy,
    Segment,
    decode_samples,
    read_samples,
)
from trainer.distributed import Distributed, all_reduce_sum
from trainer.masking import DynamicMasking
from trainer.model import BertForPreTraining


class EvaluationStopped(Exception):
    """A stop signal came during an evaluation, on some rank: every rank left it off at the
    next batch (a preempted run checkpoints within seconds, not after the held-out split)."""


@dataclass(frozen=True, slots=True)
class EvalResult:
    mlm_loss: float
    mlm_accuracy: float
    nsp_accuracy: float | None  # None for a model without the NSP head (--objective mlm)
    predictions: int
    sequences: int

    def as_dict(self) -> dict[str, float | int]:
        """The metrics as logged; without the NSP head, no "nsp_accuracy" key at all."""
        values: dict[str, float | int] = {
            "mlm_loss": self.mlm_loss,
            "mlm_accuracy": self.mlm_accuracy,
        }
        if self.nsp_accuracy is not None:
            values["nsp_accuracy"] = self.nsp_accuracy
        return values | {"predictions": self.predictions, "sequences": self.sequences}

    def summary(self) -> str:
        """The log line's words: `MLM loss …, MLM accuracy …[, NSP accuracy …]`."""
        text = f"MLM loss {self.mlm_loss:.3f}, MLM accuracy {self.mlm_accuracy:.3f}"
        if self.nsp_accuracy is not None:
            text += f", NSP accuracy {self.nsp_accuracy:.3f}"
        return text


@torch.no_grad()
def evaluate(
    model: BertForPreTraining,
    source: DataSource,
    env: Distributed,
    batch_size: int,
    max_sequences: int | None = None,
    autocast: torch.autocast | None = None,
    compiled: Callable[..., Any] | None = None,
    pad_to: FixedShape | None = None,
    masking: DynamicMasking | None = None,
    seed: int = 0,
    stop: Callable[[], bool] | None = None,
) -> EvalResult:
    """Evaluate `model` (unwrapped: no DDP hooks) on `source`'s first `max_sequences`
    sequences (all of them with None), this rank's part of them; the totals of every rank.

    Under --compile, `compiled` (torch.compile of `model`) runs every full batch, padded to
    `pad_to` as training batches are: one graph in eval mode, never recompiled; the last,
    shorter batch of a rank's part runs on `model` eagerly, so its size brings no new shape.
    Shards stored without masks are evaluated with `masking` drawn from `seed` and epoch 0:
    the same positions at every evaluation.
    Sums stay on the device and are read once at the end: no batch waits for the GPU.
    Where `stop()` turns true (a stop signal noted) on any rank, each rank leaves off at its
    next batch, and all raise EvaluationStopped after the one all-reduce.
    """
    config = LoaderConfig(
        batch_size,
        rank=env.rank,
        world_size=env.world_size,
        shuffle=False,
        drop_last=False,
        pad_to=pad_to,
        masking=masking,
        seed=seed,
        limit=max_sequences,
    )
    was_training = model.training
    model.eval()
    nsp = model.config.nsp
    # loss × predictions, correct predictions, predictions[, correct NSP with the NSP head]
    sums = torch.zeros(4 if nsp else 3, dtype=torch.float64, device=env.device)
    sequences = 0
    stopped = 0.0
    with PretrainingLoader(source, config) as loader:
        for batch in loader.epoch(DataPosition()):
            if stop is not None and stop():
                stopped = 1.0
                break
            # The fields the model takes: without the NSP head, the NSP label is never read.
            inputs = {k: batch[k].to(env.device, non_blocking=True) for k in model.input_names}
            size = len(batch[BatchField.INPUT_IDS])
            forward = compiled if compiled is not None and size == batch_size else model
            lengths = np.count_nonzero(batch[BatchField.ATTENTION_MASK].numpy(), axis=1)
            with autocast if autocast is not None else contextlib.nullcontext():
                # --unpad's counts from the host, as in training (trainer/train.py)
                positions = inputs[BatchField.INPUT_IDS].numel()
                out = forward(**inputs, **model.unpad_hints(lengths, positions, env.device))
            parts = [out.mlm_loss.double() * out.mlm_count, out.mlm_correct, out.mlm_count]
            if nsp:
                parts.append(out.nsp_correct)
            sums += torch.stack(parts).to(torch.float64)
            sequences += size
    model.train(was_training)
    counts = torch.tensor([sequences, stopped], dtype=torch.float64)
    totals = torch.cat([sums.cpu(), counts])
    loss_sum, correct, predictions, *nsp_correct, sequences_all, stops = all_reduce_sum(
        env, totals
    ).tolist()
    if stops:
        raise EvaluationStopped(f"left off after {int(sequences_all)} held-out sequences")
    return EvalResult(
        mlm_loss=loss_sum / max(predictions, 1),
        mlm_accuracy=correct / max(predictions, 1),
        nsp_accuracy=nsp_correct[0] / max(sequences_all, 1) if nsp else None,
        predictions=int(predictions),
        sequences=int(sequences_all),
    )


@dataclass(frozen=True, slots=True)
class MixEvalResult:
    """A mix's evaluation: each source's held-out result, and the mix's figures, each the
    mean of the sources' weighted by their --mix shares (normalised over the sources
    evaluated), so the mix's loss is what the mix's own proportions would score whatever
    the sizes of the held-out splits; its predictions and sequences are the sums."""

    mix: EvalResult
    sources: dict[str, EvalResult]

    @classmethod
    def of(cls, sources: dict[str, EvalResult], weights: Mapping[str, float]) -> MixEvalResult:
        total = math.fsum(weights[name] for name in sources)
        share = {name: weights[name] / total for name in sources}

        def mean(figure: Callable[[EvalResult], float | None]) -> float | None:
            values = [(share[name], figure(result)) for name, result in sources.items()]
            if any(value is None for _, value in values):
                return None
            return math.fsum(weight * value for weight, value in values)  # type: ignore[operator]

        mix = EvalResult(
            mlm_loss=mean(lambda r: r.mlm_loss),  # type: ignore[arg-type]  # never None
            mlm_accuracy=mean(lambda r: r.mlm_accuracy),  # type: ignore[arg-type]
            nsp_accuracy=mean(lambda r: r.nsp_accuracy),
            predictions=sum(r.predictions for r in sources.values()),
            sequences=sum(r.sequences for r in sources.values()),
        )
        return cls(mix, sources)

    @property
    def mlm_loss(self) -> float:
        return self.mix.mlm_loss

    def as_dict(self) -> dict[str, Any]:
        """The mix's metrics as one source's are logged, and "sources": each source's."""
        return self.mix.as_dict() | {
            "sources": {name: result.as_dict() for name, result in self.sources.items()}
        }

    def summary(self) -> str:
        """The log line's words: the mix's, then each source's MLM loss and accuracy."""
        each = "; ".join(
            f"{name} MLM loss {r.mlm_loss:.3f}, accuracy {r.mlm_accuracy:.3f}"
            for name, r in self.sources.items()
        )
        return f"mix {self.mix.summary()}; {each}"


def evaluate_sources(
    model: BertForPreTraining,
    heldouts: Mapping[str, DataSource],
    weights: Mapping[str, float],
    env: Distributed,
    batch_size: int,
    max_sequences: int | None = None,
    **options: Any,
) -> MixEvalResult:
    """`evaluate` on each source's held-out split in turn (the first `max_sequences` of
    each: --eval-batches counts per source), and the mix's figures from them."""
    results = {
        name: evaluate(model, source, env, batch_size, max_sequences, **options)
        for name, source in heldouts.items()
    }
    return MixEvalResult.of(results, weights)


def masked_label_counts(source: DataSource) -> Counter[int]:
    """How often each token id is a masked_lm label in `source`, read as the loader reads
    (retries, sha256 checks, header checks); the ids are not decoded, only the labels."""
    counts: Counter[int] = Counter()
    segments = [Segment(shard, 0, shard.samples) for shard in source.shards]
    for sample, header in decode_samples(read_samples(segments, RetryPolicy())):
        labels = np.frombuffer(
            sample.data, header.id_dtype, header.n_predictions, header.labels_offset
        )
        counts.update(labels.tolist())
    return counts


def unigram_baseline(train: DataSource, heldout: DataSource) -> tuple[int, float]:
    """(token id, held-out MLM accuracy) of always predicting the most masked train token."""
    train_counts = masked_label_counts(train)
    token = max(train_counts, key=lambda t: (train_counts[t], -t))
    heldout_counts = masked_label_counts(heldout)
    return token, heldout_counts[token] / max(sum(heldout_counts.values()), 1)
