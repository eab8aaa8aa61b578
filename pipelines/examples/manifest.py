"""The shards directory's manifest.json: the run's config, layout, counts and every shard,
checked against what was made (a lost or repeated step stops the run), written last."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from typing import Any

from pipelines.beam import files
from pipelines.beam.documents import DocumentsInput
from pipelines.examples.config import ExamplesConfig
from pipelines.examples.plan import Layout
from pipelines.io.vocabulary import Vocabulary
from schemas.checks import MAX_RECORD_BYTES
from schemas.examples import SPLITS
from schemas.shards import (
    SequenceOutput,
    ShardInfo,
    ShardsManifest,
    SplitShards,
    seq_dir,
    split_dir,
)

DEVIATIONS = [
    "NotNext partner: drawn from a random group of documents of the whole corpus, regrouped "
    "every dupe pass, never the same document (Google: any document of the in-memory corpus, "
    "the same one possible after 10 tries; NVIDIA/HF: the same file or shard only)",
    "randomness: one generator per (seed, document id, pass, max_seq_length) instead of one "
    "generator walked over the corpus in input order, so output is independent of runner "
    "and worker count; values differ from Google's for the same seed, distributions do not",
    "masking: the 80/10/10 draws are vectorised per example (numpy PCG64)",
    "whole-word masking: the 80/10/10 choice is made per word and applied to all its pieces "
    "(google-research/bert#910); a word never spans [SEP]",
    "random replacement token: never [PAD]/[UNK]/[CLS]/[SEP]/[MASK] or an [unusedN] slot",
    "held-out split: documents whose id hashes below --heldout-fraction, with their own "
    "partner groups (no held-out text in training examples)",
    "output: globally shuffled, equal-size shards instead of one file per input",
    "next_sentence_label: 1 = NotNext, 0 = IsNext (Google's and HF's convention)",
    "a sentence longer than 16,384 characters is cut after the last space of each window "
    "into sentences of at most that many (counts: sentences_cut), so memory is bounded "
    "(Google tokenizes it whole: 6.9 GB for a 62 MB one-sentence book)",
]
# Where to write and how to spread the work, not what is made: the same run elsewhere, or
# with one shuffle level instead of two, gives the same manifest bytes.
_NOT_RECORDED = ("output", "overwrite", "shuffle_levels", "regroup_budget_mb")


def build_manifest(
    config: ExamplesConfig,
    layout: Layout,
    vocab: Vocabulary,
    inputs: list[DocumentsInput],
    shards: list[dict[str, Any]],
    summaries: list[dict[str, Any]],
) -> ShardsManifest:
    counts, dropped, rejected, rejects_files = _sum_summaries(summaries)
    infos = sorted((ShardInfo.from_dict(s) for s in shards), key=lambda s: s.path)
    outputs = {
        seq_dir(length): SequenceOutput(length, predictions, _splits(length, infos, counts))
        for length, predictions in zip(
            config.max_seq_lengths, config.max_predictions_per_seq, strict=True
        )
    }
    counts["rejected"] = sum(rejected.values())
    recorded = {k: v for k, v in asdict(config).items() if k not in _NOT_RECORDED}
    return ShardsManifest(
        vocab={
            "path": config.vocab,
            "sha256": vocab.sha256,
            "size": vocab.size,
            "cased": vocab.cased,
        },
        inputs=[
            {
                "path": i.directory,
                "manifest_sha256": i.manifest_sha256,
                "documents": i.manifest.counts.get("documents", 0),
                "text_bytes": i.manifest.counts.get("text_bytes", 0),
            }
            for i in inputs
        ],
        config=json.loads(json.dumps(recorded)),
        layout=json.loads(json.dumps(asdict(layout))),
        deviations=DEVIATIONS,
        counts=dict(sorted(counts.items())),
        dropped=dict(sorted(dropped.items())),
        rejected=dict(sorted(rejected.items())),
        outputs=outputs,
        rejects_files=sorted(rejects_files),
    )


def _sum_summaries(summaries: list[dict[str, Any]]) -> tuple[Counter, Counter, Counter, list]:
    counts: Counter = Counter()
    dropped: Counter = Counter()
    rejected: Counter = Counter()
    rejects_files = []
    for summary in summaries:
        counts.update(summary["counts"])
        dropped.update(summary["dropped"])
        rejected.update(summary["rejected"])
        if summary["rejects_file"]:
            rejects_files.append(summary["rejects_file"])
    return counts, dropped, rejected, rejects_files


def _splits(length: int, infos: list[ShardInfo], counts: Counter) -> dict[str, SplitShards]:
    """The splits of one length, their counts taken out of `counts`, checked against shards."""
    splits = {}
    for split in SPLITS:
        prefix = split_dir(length, split)
        split_shards = [s for s in infos if s.path.startswith(prefix + "/")]
        splits[split] = SplitShards(
            samples=counts.pop(f"{prefix}/examples", 0),
            not_next=counts.pop(f"{prefix}/not_next", 0),
            tokens=counts.pop(f"{prefix}/tokens", 0),
            predictions=counts.pop(f"{prefix}/predictions", 0),
            shards=split_shards,
        )
        written = sum(s.samples for s in split_shards)
        if written != splits[split].samples:
            raise RuntimeError(
                f"{prefix}: {written} samples in shards but {splits[split].samples} made; "
                "a step lost or repeated work"
            )
    return splits


def report(manifest_path: str) -> int:
    """Print what the run made, per output tree and overall."""
    raw = files.read_file(manifest_path, MAX_RECORD_BYTES)
    manifest = ShardsManifest.from_json(raw.decode("utf-8"))
    for name, out in manifest.outputs.items():
        for split, shards in out.splits.items():
            ratio = shards.not_next / shards.samples if shards.samples else 0.0
            print(
                f"{name}/{split}: {shards.samples} examples in {len(shards.shards)} shards "
                f"(NotNext {ratio:.3f}, {shards.predictions / max(1, shards.samples):.1f} "
                "predictions per example)"
            )
    print(
        f"{manifest_path}: {manifest.counts.get('documents', 0)} documents, "
        f"{manifest.counts.get('tokens', 0)} tokens; dropped {manifest.dropped or {}}; "
        f"rejected {manifest.rejected or {}}"
    )
    made = sum(s.samples for out in manifest.outputs.values() for s in out.splits.values())
    if not made:
        # Not a failure: every chunk of a corpus of one document (a single sentence, say)
        # needs a NotNext partner, and there is no other document to draw one from.
        print(
            f"{manifest_path}: no example was made: each split needs at least two documents "
            "(a NotNext pair takes its second segment from another document; see the rejects)"
        )
    return 0
