"""What `bertkit inspect` was pointed at when it is neither shards nor documents: a
vocabulary directory, a training run's checkpoints, or something it does not read, which it
names in one line (a transformers model directory, a folder that holds artifacts)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from pipelines.io import storage
from schemas.checkpoint import CHECKPOINTS_DIR, LATEST_FILE
from schemas.examples import SHARDS_MANIFEST_NAME
from schemas.manifest import MANIFEST_NAME
from schemas.vocab import TOKENIZER_FILE, VOCAB_FILE, VOCAB_METADATA_FILE

# The files `bertkit export-hf` writes that mark a transformers model directory.
_HF_MODEL_FILES = ("config.json", "model.safetensors")
# What marks a directory as one of bertkit's artifacts, for naming those inside a folder.
_ARTIFACT_MARKERS = (SHARDS_MANIFEST_NAME, MANIFEST_NAME, VOCAB_METADATA_FILE, CHECKPOINTS_DIR)


@dataclass(frozen=True, slots=True)
class OtherArtifact:
    """A vocabulary or a run's checkpoints: what it is, and how to describe it."""

    kind: str  # "a vocabulary directory", "a training run's checkpoints"
    describe: Callable[[], list[str]]


def find_other_artifact(path_or_url: str) -> OtherArtifact | None:
    """A vocabulary or checkpoints at `path_or_url`, or None when it holds neither.

    A URL with a query (presigned) names one object, so nothing beside it is probed: no
    request goes out with the query inside its path, and the caller's own refusal stands."""
    if storage.query_of(path_or_url):
        return None
    target = path_or_url.rstrip("/") if len(path_or_url) > 1 else path_or_url
    name = storage.basename(target)
    vocab_dir = storage.parent(target) if name in (VOCAB_METADATA_FILE, VOCAB_FILE) else target
    # A bertkit vocabulary's, a released one's (transformers 5 saves tokenizer.json alone).
    markers = (VOCAB_METADATA_FILE, VOCAB_FILE, TOKENIZER_FILE)
    if name == VOCAB_FILE or any(storage.exists(storage.join(vocab_dir, m)) for m in markers):
        from pipelines.inspect.vocabulary import describe_vocabulary

        return OtherArtifact("a vocabulary directory", lambda: describe_vocabulary(target))
    if storage.is_remote(target):
        return _remote_checkpoints(target)
    from pipelines.inspect.checkpoints import describe_checkpoints, find_checkpoints

    found = find_checkpoints(target)
    if found is None:
        return None
    return OtherArtifact("a training run's checkpoints", lambda: describe_checkpoints(found))


def _remote_checkpoints(url: str) -> OtherArtifact | None:
    """Checkpoints on object storage are named, not read: a checkpoint is one large
    torch.save file, read from a local or mounted path."""
    name = storage.basename(url)
    candidates = [storage.join(url, f"{CHECKPOINTS_DIR}/{LATEST_FILE}")]
    candidates.append(storage.join(url, LATEST_FILE))
    is_checkpoint = name.startswith("step-") and name.endswith(".pt")
    if not is_checkpoint and not any(storage.exists(c) for c in candidates):
        return None

    def refuse() -> list[str]:
        from pipelines.inspect.targets import InspectError

        raise InspectError(
            f"{storage.redact(url)} holds a training run's checkpoints; inspect reads them on a "
            "local or mounted path: copy the run directory (or its checkpoints/latest and the "
            "checkpoint it names) down and inspect the copy"
        )

    return OtherArtifact("a training run's checkpoints", refuse)


def plain_refusal(path: str) -> str | None:
    """One line for a local directory inspect does not read but can name: a transformers
    model directory, or a folder of artifacts (such as `bertkit demo`'s output). None
    otherwise: the storage layer's message (an incomplete artifact) stands."""
    if storage.is_remote(path) or not os.path.isdir(path):
        return None
    if all(os.path.isfile(os.path.join(path, name)) for name in _HF_MODEL_FILES):
        return (
            f"{path} is a transformers model directory (what `bertkit export-hf` writes), "
            "which inspect does not read: load it with transformers "
            f"(BertForPreTraining.from_pretrained({path!r})), or inspect the run's checkpoints"
        )
    inside = _artifacts_below(path, depth=2)
    if inside:
        return f"{path} is a folder of artifacts, not one itself: inspect one of " + ", ".join(
            os.path.join(path, name) for name in inside
        )
    return None


def _artifacts_below(path: str, depth: int) -> list[str]:
    """The subdirectories (to `depth` levels) that are bertkit artifacts, relative to `path`:
    `bertkit demo`'s output holds documents/books two levels down."""
    found = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        if any(os.path.exists(os.path.join(entry.path, m)) for m in _ARTIFACT_MARKERS):
            found.append(entry.name)
        elif depth > 1:
            found += [f"{entry.name}/{name}" for name in _artifacts_below(entry.path, depth - 1)]
    return found
