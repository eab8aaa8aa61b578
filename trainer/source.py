"""The shard list a run reads, the first stage of trainer/data.py: `open_source` (in
pipelines/io/shards/source.py, shared with `bertkit inspect`) resolves a shards directory,
its manifest.json or shard URLs into shards with sample counts, and `check_source` refuses
shards the model cannot take.

A mix (`--shards A B --mix 0.7,0.3`) opens each source so; `source_names` gives each the
short name metrics.jsonl and TensorBoard know it by (a resume keeps the checkpoint's:
`resumed_names`), and `check_mix_sources` refuses sources that cannot train one model
together, naming the source and what differs (its order and loader: trainer/mix.py).
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.io import storage
from pipelines.io.released_vocab import recorded_strip_accents
from pipelines.io.shards.source import (  # noqa: F401  (the trainer's names for them)
    DataConfigError,
    DataSource,
    ShardEntry,
    open_source,
    source_of,
)
from schemas.shards import PAIRS

_LOG = logging.getLogger("bertkit.train")


def heldout_source(
    source: DataSource, name: str | None = None, main: bool = True
) -> DataSource | None:
    """The held-out split beside the train shards in the manifest; None turns evaluation off
    (of the source `name`, in a mix: the others are evaluated). Its warnings are the main
    process's alone (`main`): said once, not once a process."""
    off = "evaluation is off" if name is None else f"source {name} is not evaluated"
    warn = _LOG.warning if main else _LOG.debug
    if source.manifest_url is None or source.manifest is None:
        warn("no manifest, so no held-out split: %s", off)
        return None
    output = source.output
    heldout = output.splits.get("heldout") if output is not None else None
    if heldout is None or not heldout.shards:
        warn("%s: no held-out shards; %s", source.manifest_url, off)
        return None
    if source.manifest.sequences == PAIRS and not heldout.not_next:
        warn(
            "%s: the held-out split holds IsNext pairs only (its documents had no NotNext "
            "partner: one document, say), so its NSP accuracy counts one class; its MLM "
            "figures are unaffected",
            storage.redact(source.manifest_url),
        )
    return source_of(source.manifest, source.manifest_url, "heldout", source.max_seq_length)


def check_source(
    source: DataSource, max_position_embeddings: int, vocab_size: int, vocab_sha256: str | None
) -> None:
    """Refuse shards the model cannot take, before any step runs."""
    where = source.manifest_url or source.shards[0].url
    if source.max_seq_length is not None and source.max_seq_length > max_position_embeddings:
        raise DataConfigError(
            f"{where}: examples of up to {source.max_seq_length} tokens, the model has "
            f"{max_position_embeddings} positions; use shards of at most that length"
        )
    if source.manifest is None:
        return
    vocab = source.manifest.vocab
    if vocab.get("size") is not None and vocab["size"] > vocab_size:
        raise DataConfigError(
            f"{where}: the shards' vocabulary has {vocab['size']} tokens, the model "
            f"{vocab_size}; train with the shards' vocabulary"
        )
    if vocab_sha256 is not None and vocab.get("sha256") != vocab_sha256:
        raise DataConfigError(
            f"{where}: the shards were made with vocabulary sha256 {vocab.get('sha256')}, "
            f"the model was trained with {vocab_sha256}; token ids would mean different "
            "words. Rebuild the shards with the model's vocabulary, or start a new model"
        )


def source_names(specs: Sequence[str]) -> tuple[str, ...]:
    """Each --shards source's short name, for metrics: its directory's name
    (`out/wiki/shards` → "shards", a manifest.json or shard pattern → the shards directory
    above it); where two collide, each colliding name takes its parent's in front
    ("wiki-shards", "domain-shards"), and where that collides too, its place in --shards
    ("shards-1", "shards-2"). A local path is made absolute and normalised first (`..` and
    `.` resolved, links kept), so the same shards get the same name from any working
    directory: `shards` run from `/data` and `../shards` from `/data/law` are both
    `/data/shards`. A resume keeps its checkpoint's names (`resumed_names`)."""
    paths = [_shards_path(spec) for spec in specs]
    names = [_last(path, 1) for path in paths]
    clashing = {name for name in names if names.count(name) > 1}
    names = [
        f"{_last(path, 2)}-{name}" if name in clashing and _last(path, 2) else name
        for path, name in zip(paths, names, strict=True)
    ]
    clashing = {name for name in names if names.count(name) > 1}
    return tuple(f"{n}-{i + 1}" if n in clashing else n for i, n in enumerate(names))


def _shards_path(spec: str) -> str:
    """The shards directory a --shards value names, as a path of '/'-separated parts: a
    local one absolute and normalised, a URL's without its scheme, normalised."""
    path = storage.redact(spec).split("{")[0].split("?")[0].rstrip("/")
    if storage.is_url(path):
        path = posixpath.normpath(path.split("://", 1)[1])
    else:
        path = os.path.abspath(path)
    if path.endswith((".json", ".tar")) or "{" in spec:
        path = path.rsplit("/", 1)[0]  # the manifest or a shard: its directory
    parts = path.split("/")
    # A shard pattern names SHARDS/seqN/SPLIT/shard-…: the shards directory is above seqN.
    if len(parts) > 2 and parts[-2].startswith("seq") and parts[-2][3:].isdigit():
        parts = parts[:-2]
    return "/".join(parts)


def _last(path: str, count: int) -> str:
    """The `count`-th name from the end of `path` ("" where it has none); `.` and `..` are
    no names."""
    parts = [part for part in path.split("/") if part not in ("", ".", "..")]
    return parts[-count] if len(parts) >= count else ""


def resumed_names(
    saved: Mapping[str, Any] | None,
    now: Mapping[str, Any],
    specs: Sequence[str],
    main: bool = True,
) -> tuple[str, ...] | None:
    """A resumed mix's source names: the ones its checkpoint's data record (`saved`) gave
    the same shards, so that metrics.jsonl's and TensorBoard's series go on under them
    whatever path --shards gives now (another working directory, the data moved). Matched
    by each source's shards digest, in the resumed order (the resume's check holds them
    equal); None where the record names none for them (one source, a checkpoint from before
    mixes). The `main` process says which names differ from this run's own."""
    was, is_ = (saved or {}).get("sources") or [], now.get("sources") or []
    digests = [each.get("shards_sha256") for each in is_]
    if not is_ or [each.get("shards_sha256") for each in was] != digests:
        return None
    if not all(isinstance(each.get("name"), str) and each["name"] for each in was):
        return None
    kept = tuple(each["name"] for each in was)
    differ = [
        f"{storage.redact(spec)} is {name} (not {each['name']})"
        for spec, name, each in zip(specs, kept, is_, strict=True)
        if name != each["name"]
    ]
    if differ and main:
        _LOG.info(
            "--resume: each source keeps the name the checkpoint gives it, the one "
            "metrics.jsonl and TensorBoard know it by: %s",
            ", ".join(differ),
        )
    return kept


def log_mix(sources: Sequence[DataSource], names: Sequence[str], weights: Sequence[float]) -> None:
    """The setup log's lines for a mix: each source's name (metrics.jsonl's and
    TensorBoard's), its share of a global batch, its samples and where it is."""
    _LOG.info("a mix of %d sources, by the names metrics.jsonl and TensorBoard use:", len(names))
    for name, each, weight in zip(names, sources, weights, strict=True):
        _LOG.info(
            "  %s: %.4g of each global batch, %d train samples, %s",
            name,
            weight,
            each.samples,
            storage.redact(each.manifest_url or each.shards[0].url),
        )


def check_mix_sources(sources: Sequence[DataSource], names: Sequence[str]) -> None:
    """Refuse a mix whose sources cannot train one model together, before any work: each
    needs its manifest, and all must share the vocabulary (vocab.txt sha256, casing and
    accent stripping: token ids mean the same words), the sequence length (one
    --max-seq-length) and the recipe the shards hold (sentence pairs or full sentences;
    stored masks or none), so one objective and one masking fit all. One line names the
    source that differs from the first, and in what."""
    from trainer.recipe import shards_kind  # recipe.py imports this module

    first, first_name = sources[0], names[0]
    for source, name in zip(sources, names, strict=True):
        if source.manifest is None:
            raise DataConfigError(
                f"--shards source {name} ({storage.redact(source.shards[0].url)}): no "
                "manifest.json found; a mix compares its sources' vocabularies and recipes "
                "by their manifests: give each source's shards directory"
            )
    assert first.manifest is not None
    for source, name in zip(sources[1:], names[1:], strict=True):
        assert source.manifest is not None
        differs = []
        for field in ("sha256", "cased"):
            was, now = first.manifest.vocab.get(field), source.manifest.vocab.get(field)
            if was != now:
                differs.append(f"vocabulary {field} {_short(now)}, {first_name} {_short(was)}")
        # Accent stripping, where the casing agrees (a released tokenizer may set it apart).
        was, now = map(recorded_strip_accents, (first.manifest.vocab, source.manifest.vocab))
        if was != now and first.manifest.vocab.get("cased") == source.manifest.vocab.get("cased"):
            differs.append(f"vocabulary strip_accents {now}, {first_name} {was}")
        if source.max_seq_length != first.max_seq_length:
            differs.append(
                f"sequence length {source.max_seq_length}, {first_name} {first.max_seq_length}"
            )
        (sequences, masks), (was_sequences, was_masks) = shards_kind(source), shards_kind(first)
        if sequences != was_sequences:
            differs.append(f"sequences {sequences}, {first_name} {was_sequences}")
        if masks != was_masks:
            differs.append(f"masking {masks}, {first_name} {was_masks}")
        # Stored masks: one shape of prediction slots for every batch (--compile pads to it).
        predictions = getattr(source.output, "max_predictions_per_seq", None)
        was_predictions = getattr(first.output, "max_predictions_per_seq", None)
        same_shape = masks == was_masks and source.max_seq_length == first.max_seq_length
        if same_shape and predictions != was_predictions:
            differs.append(
                f"{predictions} predictions a sequence at most, {first_name} {was_predictions}"
            )
        if differs:
            where = storage.redact(source.manifest_url or source.shards[0].url)
            raise DataConfigError(
                f"--shards source {name} ({where}) differs from {first_name}: "
                + "; ".join(differs)
                + ". The sources of a mix share one vocabulary, sequence length and recipe: "
                "build them with the same `bertkit examples` flags and vocabulary"
            )


def _short(value: object) -> str:
    text = str(value)
    return f"{text[:16]}…" if len(text) == 64 else text  # a sha256


def mix_resume_problems(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str] | None:
    """What a resume would change in a mix's sources or shares (the data records of the
    checkpoint and of this run, trainer/setup.py's `data_record`), as phrases for --resume's
    one line; None where neither run is a mix (the one-source comparison applies). A source
    is its shards (their digest), whatever its path: a mix's sources may move."""
    was, is_ = saved.get("sources"), now.get("sources")
    if not was and not is_:
        return None
    if not was or not is_:
        before = _sources_shown(was) if was else f"one source ({saved.get('manifest')})"
        after = _sources_shown(is_) if is_ else f"one source ({now.get('manifest')})"
        return [f"--shards {before}, now {after}"]
    problems = []
    if [s["shards_sha256"] for s in was] != [s["shards_sha256"] for s in is_]:
        problems.append(f"--shards {_sources_shown(was)}, now {_sources_shown(is_)}")
    if saved.get("mix") != now.get("mix"):
        problems.append(f"--mix {saved.get('mix')}, now {now.get('mix')}")
    if saved.get("max_seq_length") != now.get("max_seq_length"):
        problems.append(
            f"sequence length {saved.get('max_seq_length')}, now {now.get('max_seq_length')}"
        )
    return problems


def _sources_shown(sources: Sequence[Mapping[str, Any]]) -> str:
    """ "demo-shards (digest 1f2e…), wiki-shards (digest 9a0b…)": a mix's sources in order."""
    return ", ".join(f"{s['name']} (digest {str(s['shards_sha256'])[:8]}…)" for s in sources)
