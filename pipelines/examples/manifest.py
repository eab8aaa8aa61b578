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
from pipelines.io.recorded_paths import record_path
from pipelines.io.vocabulary import Vocabulary
from schemas.checks import MAX_RECORD_BYTES
from schemas.examples import SPLITS
from schemas.shards import (
    PAIRS,
    STATIC,
    SequenceOutput,
    ShardInfo,
    ShardsManifest,
    SplitShards,
    seq_dir,
    split_dir,
)

_NOT_NEXT_PARTNER = (
    "NotNext partner: drawn from a random group of documents of the whole corpus, regrouped "
    "every dupe pass, never the same document (Google: any document of the in-memory corpus, "
    "the same one possible after 10 tries; NVIDIA/HF: the same file or shard only)"
)
_RANDOMNESS = (
    "randomness: one generator per (seed, document id, pass, max_seq_length) instead of one "
    "generator walked over the corpus in input order, so output is independent of runner "
    "and worker count; values differ from Google's for the same seed, distributions do not"
)
_MASKING = (
    "masking: the 80/10/10 draws are vectorised per example (numpy PCG64)",
    "whole-word masking: the 80/10/10 choice is made per word and applied to all its pieces "
    "(google-research/bert#910); a word never spans [SEP]",
    "random replacement token: never [PAD]/[UNK]/[CLS]/[SEP]/[MASK] or an [unusedN] slot",
)
_HELDOUT = (
    "held-out split: documents whose id hashes below --heldout-fraction, with their own "
    "partner groups (no held-out text in training examples)"
)
_OUTPUT = "output: globally shuffled, equal-size shards instead of one file per input"
_LABEL = "next_sentence_label: 1 = NotNext, 0 = IsNext (Google's and HF's convention)"
_LONG_SENTENCE = (
    "a sentence longer than 16,384 characters is cut after the last space of each window "
    "into sentences of at most that many (counts: sentences_cut), so memory is bounded "
    "(Google tokenizes it whole: 6.9 GB for a 62 MB one-sentence book)"
)
# Google's sentence pairs with static masks, the default: this list, in this order, is what
# every such manifest has recorded.
DEVIATIONS = [
    _NOT_NEXT_PARTNER,
    _RANDOMNESS,
    *_MASKING,
    _HELDOUT,
    _OUTPUT,
    _LABEL,
    _LONG_SENTENCE,
]
_FULL_SENTENCES = (
    "full sentences (RoBERTa's FULL-SENTENCES): a sentence that does not fit is cut at the "
    "end of a sequence and continues at the start of the next, and one longer than a "
    "sequence is cut into pieces, so every sequence is filled to max_seq_length (RoBERTa "
    "packs whole sentences and pads the rest); the last sequence of a group is shorter, and "
    "one is a token short where a document ends one token before its end (no room for a "
    "[SEP] and a token: counts seqN/SPLIT/short_sequences)",
    "full sentences: documents are packed per partner group of about --partner-group-docs "
    "documents, in id order, regrouped every dupe pass (RoBERTa: the corpus in its order); "
    "doc_a and doc_b are the first and last document a sequence draws from; doc_b is "
    "stored empty when they are the same (a reader gives doc_a for it)",
    "full sentences: no next-sentence label (stored as 0) and one segment (segment A is the "
    "whole sequence, every segment id 0)",
    "randomness: one generator per (seed, split, pass, partner group, max_seq_length), so "
    "output is independent of runner and worker count",
)
_NO_MASKS = "masks: none stored (--masking none): the trainer draws them, dynamically"


def deviations(config: ExamplesConfig) -> list[str]:
    """Where this run's algorithm deliberately differs from Google's (or RoBERTa's)."""
    if config.sequences == PAIRS and config.masking == STATIC:
        return list(DEVIATIONS)
    masking = list(_MASKING) if config.masking == STATIC else []
    if config.sequences == PAIRS:
        kind = [_NOT_NEXT_PARTNER, _RANDOMNESS, *masking, _HELDOUT, _OUTPUT, _LABEL]
    else:
        kind = [*_FULL_SENTENCES, *masking, _HELDOUT, _OUTPUT]
    return [*([] if masking else [_NO_MASKS]), *kind, _LONG_SENTENCE]


# Where to write and how to spread the work, not what is made: the same run elsewhere, or
# with one shuffle level instead of two, gives the same manifest bytes.
_NOT_RECORDED = ("output", "overwrite", "shuffle_levels", "regroup_budget_mb")
# Flags added after manifests were published, and their defaults: recorded only when not the
# default, so that a run without them keeps the manifest bytes it had.
_RECORDED_UNLESS_DEFAULT = {"sequences": PAIRS, "masking": STATIC, "cased": None}


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
    # With --masking none nothing is predicted: 0 per length.
    predictions = config.max_predictions_per_seq or (0,) * len(config.max_seq_lengths)
    outputs = {
        seq_dir(length): SequenceOutput(length, most, _splits(length, infos, counts))
        for length, most in zip(config.max_seq_lengths, predictions, strict=True)
    }
    counts["rejected"] = sum(rejected.values())
    recorded = {k: v for k, v in asdict(config).items() if _recorded(k, v)}
    return ShardsManifest(
        vocab=vocab_record(vocab, config),
        inputs=[
            {
                "path": record_path(i.directory, config.output),
                "manifest_sha256": i.manifest_sha256,
                "documents": i.manifest.counts.get("documents", 0),
                "text_bytes": i.manifest.counts.get("text_bytes", 0),
            }
            for i in inputs
        ],
        config=json.loads(json.dumps(recorded)),
        layout=json.loads(json.dumps(asdict(layout))),
        deviations=deviations(config),
        counts=dict(sorted(counts.items())),
        dropped=dict(sorted(dropped.items())),
        rejected=dict(sorted(rejected.items())),
        outputs=outputs,
        rejects_files=sorted(rejects_files),
        sequences=config.sequences,
        masking=config.masking,
    )


def vocab_record(vocab: Vocabulary, config: ExamplesConfig) -> dict[str, Any]:
    """The manifest's vocab record: where the vocabulary is, the sha256 of its vocab.txt,
    its size and casing; for a released BERT's vocabulary also its origin (the files its
    directory held and what said its casing). A `bertkit vocab` directory's record has no
    origin (its vocab.json says it), so its manifests keep the bytes they had."""
    record: dict[str, Any] = {
        "path": record_path(config.vocab, config.output),
        "sha256": vocab.sha256,
        "size": vocab.size,
        "cased": vocab.cased,
    }
    origin = vocab.origin()
    if origin is not None:
        record["origin"] = origin
    return record


def _recorded(name: str, value: Any) -> bool:
    if name in _NOT_RECORDED:
        return False
    return name not in _RECORDED_UNLESS_DEFAULT or value != _RECORDED_UNLESS_DEFAULT[name]


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
            print(f"{name}/{split}: {_split_line(manifest, out.max_seq_length, shards)}")
    print(
        f"{manifest_path}: {manifest.counts.get('documents', 0)} documents, "
        f"{manifest.counts.get('tokens', 0)} tokens; dropped {manifest.dropped or {}}; "
        f"rejected {manifest.rejected or {}}"
    )
    made = sum(s.samples for out in manifest.outputs.values() for s in out.splits.values())
    if not made and manifest.sequences == PAIRS:
        # Not a failure: every chunk of a corpus of one document (a single sentence, say)
        # needs a NotNext partner, and there is no other document to draw one from.
        print(
            f"{manifest_path}: no example was made: each split needs at least two documents "
            "(a NotNext pair takes its second segment from another document; see the rejects)"
        )
    return 0


def _split_line(manifest: ShardsManifest, length: int, shards: SplitShards) -> str:
    made = f"{shards.samples} examples in {len(shards.shards)} shards"
    predictions = f"{shards.predictions / max(1, shards.samples):.1f} predictions per example"
    if manifest.masking != STATIC:
        predictions = "no masks"
    if manifest.sequences == PAIRS:
        ratio = shards.not_next / shards.samples if shards.samples else 0.0
        return f"{made} (NotNext {ratio:.3f}, {predictions})"
    padding = 1 - shards.tokens / (shards.samples * length) if shards.samples else 0.0
    return f"{made} (full sentences, {shards.tokens} tokens, padding {padding:.2%}, {predictions})"
