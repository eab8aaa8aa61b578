"""Which recipe a run trains with: the objective and the masking, resolved from the flags and
what the shards hold, refused before any work where the two cannot work together.

    shards manifest           --objective auto      --masking auto
    sentence pairs, masked    mlm+nsp               static   (BERT 2018, the default)
    sentence pairs, no masks  mlm+nsp               dynamic
    full sentences, masked    mlm                   static
    full sentences, no masks  mlm                   dynamic  (RoBERTa)

A flag given outright is taken as given, or refused with one line: NSP on full-sentence
shards (they hold no next-sentence label), static masking on shards stored without masks.
Dynamic masking needs the vocabulary (the [MASK] id, the tokens a random replacement may
take, the `##` pieces of whole words): the manifest's (its `vocab.path`, relative to the
manifest), or `--vocab DIR` when it moved, and either way with the vocab.txt sha256 the
manifest records. Static masking reads none, but a `--vocab` given is checked the same way
(a wrong one is refused, not ignored) and recorded in the checkpoints, where `export-hf`
finds it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.io import storage
from pipelines.io.recorded_paths import record_path, resolve_path
from pipelines.io.vocabulary import VocabError, Vocabulary, load_vocab
from schemas.shards import FULL_SENTENCES, NO_MASKS, PAIRS, STATIC
from schemas.vocab import VOCAB_FILE
from trainer.collate import FixedShape
from trainer.config import TrainConfig, dynamic_only_flag, mask_replace_shares
from trainer.masking import DynamicMasking
from trainer.source import DataConfigError

_LOG = logging.getLogger("bertkit.train")

if TYPE_CHECKING:
    from pipelines.io.shards.source import DataSource


@dataclass(frozen=True, slots=True)
class Recipe:
    objective: str  # "mlm+nsp" or "mlm"
    masking: str  # "static" or "dynamic"
    dynamic: DynamicMasking | None  # how masks are drawn, with --masking dynamic

    @property
    def nsp(self) -> bool:
        return self.objective == "mlm+nsp"


DEFAULT_RECIPE = Recipe("mlm+nsp", "static", None)  # BERT 2018's


def shards_kind(source: DataSource) -> tuple[str, str]:
    """(sequences, masking) of the shards: a manifest without the fields holds masked pairs,
    as do shards read without a manifest (their kind cannot be known: the 2018 default)."""
    manifest = source.manifest
    return (
        getattr(manifest, "sequences", PAIRS) or PAIRS,
        getattr(manifest, "masking", STATIC) or STATIC,
    )


def resolve_recipe(config: TrainConfig, source: DataSource) -> Recipe:
    """The run's objective and masking (DataConfigError, one line, where they cannot work)."""
    sequences, stored = shards_kind(source)
    where = source.manifest_url or source.shards[0].url
    objective = config.objective
    if objective == "auto":
        objective = "mlm" if sequences == FULL_SENTENCES else "mlm+nsp"
    if objective == "mlm+nsp" and sequences == FULL_SENTENCES:
        raise DataConfigError(
            f"--objective mlm+nsp: {where} holds full-sentence sequences, which have no "
            "next-sentence label; train them with --objective mlm (or auto)"
        )
    masking = config.masking
    if masking == "auto":
        masking = "dynamic" if stored == NO_MASKS else "static"
        if masking == "static" and (flag := dynamic_only_flag(config)):
            raise DataConfigError(
                f"{flag} shapes masks drawn with --masking dynamic, and {where} holds stored "
                f"masks, which --masking auto trains with as they are: pass --masking dynamic "
                f"to draw new ones, or leave {flag} out"
            )
    if masking == "static" and stored == NO_MASKS:
        raise DataConfigError(
            f"--masking static: {where} was made with --masking none and holds no masks; "
            "train it with --masking dynamic (or auto)"
        )
    dynamic = None
    if masking == "static" and config.vocab:
        # Static masks need no vocabulary, but a --vocab given is not ignored: it is checked
        # as with dynamic masking, then recorded in the checkpoints for export-hf.
        run_vocab(config, source, masking)
    if masking == "dynamic":
        dynamic = DynamicMasking.from_vocab(
            run_vocab(config, source, masking),
            rate=config.mask_rate,
            replace=mask_replace_shares(config.mask_replace),
            whole_word=config.whole_word_mask,
            max_predictions=config.max_predictions,
        )
    return Recipe(objective, masking, dynamic)


def heldout_masking(recipe: Recipe, heldout: DataSource) -> DynamicMasking | None:
    """How the held-out split is masked for evaluation: with its stored masks where it has
    them (the same positions for every recipe and every evaluation: static and dynamic runs
    are compared on one set), else with the run's dynamic masks drawn once, from the run's
    seed and epoch 0, so every evaluation of the run sees the same positions."""
    return recipe.dynamic if shards_kind(heldout)[1] == NO_MASKS else None


def heldout_shape(
    pad_to: FixedShape | None, heldouts: Iterable[DataSource], masking: DynamicMasking | None
) -> FixedShape | None:
    """Evaluation's shape under --compile: the training batches' widths, with the slots its
    masks need: the most the held-out splits store (their manifests' max_predictions_per_seq),
    or the dynamic rule's where they store none (`heldout_masking`). A run that masks fewer
    than the shards store (--mask-rate 0.1) trains with fewer slots than it evaluates with."""
    if pad_to is None:
        return None
    most = 0
    for heldout in heldouts:
        output = heldout.output
        assert output is not None  # checked by open_source
        length = heldout.max_seq_length
        stored = output.max_predictions_per_seq
        most = max(most, masking.max_predictions_for(length) if masking else stored)
    return FixedShape(pad_to.widths, FixedShape.of(pad_to.tokens, most).slots)


def shards_vocab_dir(source: DataSource) -> str | None:
    """Where the shards' vocabulary is: the manifest's `vocab.path`, looked up relative to the
    manifest first (pipelines/io/recorded_paths.py); None where the manifest names none."""
    record = source.manifest.vocab if source.manifest is not None else {}
    recorded = record.get("path")
    if not recorded:
        return None
    if source.manifest_url is None:
        return str(recorded)
    return resolve_path(str(recorded), storage.parent(source.manifest_url), VOCAB_FILE)


def checkpoint_vocab_record(
    source: DataSource, checkpoint_dir: str, vocab: str | None = None, say: bool = False
) -> dict[str, Any]:
    """The shards manifest's vocab record as a checkpoint in `checkpoint_dir` (the run's
    --output/checkpoints, a URL for a run on object storage) records it: the same sha256,
    size and casing, its path rewritten relative to the checkpoint, so `export-hf` finds the
    vocabulary wherever the run's tree is copied. `vocab`: the run's --vocab, checked
    against that sha256 (`run_vocab`), recorded in place of the manifest's path; a URL's
    credentials never recorded. Made once, at set-up: finding the vocabulary may ask the
    shards' storage, which a checkpoint must not wait on nor fail by. With `say` (rank 0), a
    vocabulary that is not where the record points is said now, not first at export."""
    assert source.manifest is not None  # the trainer needs one
    record = dict(source.manifest.vocab)
    directory = vocab or shards_vocab_dir(source)
    if directory is not None:
        record["path"] = record_path(directory, checkpoint_dir)
    if say and not _vocab_there(directory):
        _LOG.warning(
            "the vocabulary the shards were made with is not at %s: training goes on (the "
            "shards hold token ids), but `bertkit export-hf` will need --vocab DIR, a copy of "
            "it; or pass --vocab DIR to this run",
            storage.redact(directory or "the place their manifest names (it names none)"),
        )
    return storage.redact_values(record)


def _vocab_there(directory: str | None) -> bool:
    """Whether `directory` holds a vocab.txt; True where that cannot be told (storage that
    does not answer): the note is for a vocabulary that is surely missing."""
    if directory is None:
        return False
    try:
        return storage.exists(storage.join(directory, VOCAB_FILE))
    except OSError:
        return True


def run_vocab(config: TrainConfig, source: DataSource, masking: str = "dynamic") -> Vocabulary:
    """The vocabulary the shards were made with: `--vocab` or the manifest's `vocab.path`,
    checked against the manifest's vocab.txt sha256. With static masking only a --vocab
    given is checked: the run reads no vocabulary, so one that cannot be checked is refused
    rather than ignored."""
    record = source.manifest.vocab if source.manifest is not None else {}
    directory = config.vocab or shards_vocab_dir(source)
    expected = record.get("sha256")
    prefix = f"--vocab {config.vocab}" if masking == "static" else "--masking dynamic"
    if not directory:
        raise DataConfigError(
            "--masking dynamic needs the vocabulary the shards were made with, and the shards "
            "have no manifest naming it: pass --vocab DIR"
        )
    if masking == "static" and expected is None:
        raise DataConfigError(
            f"{prefix}: --masking static reads no vocabulary, and the shards' manifest records "
            "no vocab.txt sha256 to check it against: leave --vocab out"
        )
    try:
        # The casing the shards were made with: a released vocabulary may not say its own.
        vocab = load_vocab(directory, cased=record.get("cased"), cased_flag="the shards' manifest")
    except (OSError, VocabError) as error:
        hint = "check --vocab" if config.vocab else "if it moved, pass --vocab DIR"
        raise DataConfigError(
            f"{prefix}: cannot read the vocabulary at {directory}: {error}; {hint}"
        ) from error
    if expected is not None and vocab.sha256 != expected:
        fix = (
            "give the shards' vocabulary, or leave --vocab out (--masking static reads none)"
            if masking == "static"
            else "give the shards' vocabulary with --vocab DIR"
        )
        raise DataConfigError(
            f"{prefix}: the vocabulary at {directory} has vocab.txt sha256 "
            f"{vocab.sha256}, the shards were made with {expected}: {fix}"
        )
    return vocab
