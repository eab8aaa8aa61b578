"""What `bertkit inspect` was pointed at: a shard, a shards directory or a documents
directory, found through its manifest (nothing is listed, so plain HTTP servers work). A
shards directory is opened as the trainer opens it (pipelines/io/shards/source.py: where a
manifest lists a shard, a listed shard's URL, the order of outputs and splits); inspect
reads any manifest it can parse, and says which output or split a flag names that is not
there in its own words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.io import storage
from pipelines.io.shards.source import listed_shard, ordered_outputs, ordered_splits, shard_url
from schemas.checks import MAX_RECORD_BYTES
from schemas.manifest import DocumentsManifest
from schemas.shards import ShardInfo, ShardsManifest, seq_dir


class InspectError(Exception):
    """An artifact is not what its manifest says, or a flag does not fit the target."""


class VocabMismatchError(InspectError):
    """The vocabulary given or found is not the one the shards were made with."""


@dataclass(frozen=True, slots=True)
class ShardRef:
    """One shard to read: where it is and, through a manifest, what it must hold."""

    url: str
    info: ShardInfo | None  # None: no manifest lists it, so nothing to verify against
    output: str | None = None  # "seq128"
    split: str | None = None  # "train", "heldout"

    @property
    def label(self) -> str:
        return f"{self.output}/{self.split}" if self.output and self.split else "shard"


@dataclass(frozen=True, slots=True)
class Target:
    """What `bertkit inspect` was pointed at, with its manifest read."""

    location: storage.Location
    manifest: ShardsManifest | DocumentsManifest | None
    shard: ShardRef | None = None  # a single shard target

    @property
    def kind(self) -> storage.TargetKind:
        return self.location.kind

    @property
    def url(self) -> str:
        return self.location.url

    @property
    def manifest_url(self) -> str | None:
        return self.location.manifest_url


def open_target(path_or_url: str) -> Target:
    """Locate a target and read its manifest (for a shard: the manifest that lists it)."""
    location = storage.locate(path_or_url)
    if location.kind == "documents":
        assert location.manifest_url is not None
        manifest = _parse_manifest(location.manifest_url, DocumentsManifest)
        return Target(location, manifest)
    if location.kind == "shards":
        assert location.manifest_url is not None
        return Target(location, _parse_manifest(location.manifest_url, ShardsManifest))
    return _single_shard_target(location)


def _parse_manifest(url: str, record: type[Any]) -> Any:
    text = storage.read_text(url, MAX_RECORD_BYTES)
    try:
        return record.from_json(text)
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # RecordError too
        raise InspectError(
            f"{url}: not a {record.__name__} ({type(error).__name__}: {error}); it was written "
            "by another tool or another bertkit version, or it was cut short"
        ) from error


def _single_shard_target(location: storage.Location) -> Target:
    """A shard at DIR/seqN/SPLIT/shard-*.tar is checked against DIR/manifest.json if there
    (not for a URL with a query: see below)."""
    manifest_url, relative = storage.shard_manifest(location.url)
    # A URL with a query (presigned) names the shard alone: a manifest beside it would need
    # a signature of its own, so none is looked for.
    signed = bool(storage.query_of(location.url))
    if relative.startswith("seq") and not signed and storage.exists(manifest_url):
        manifest = _parse_manifest(manifest_url, ShardsManifest)
        found = listed_shard(location.url, manifest_url, manifest.shards_by_path())
        if found is not None:
            name, split, info = found
            located = storage.Location("shard", location.url, manifest_url)
            return Target(located, manifest, ShardRef(location.url, info, name, split))
    return Target(location, None, ShardRef(location.url, None))


def shard_refs(target: Target, seq: int | None = None, split: str | None = None) -> list[ShardRef]:
    """The shards to read, in order: outputs by sequence length, train before heldout."""
    if target.kind == "documents":
        raise InspectError(f"{target.url} is a documents directory, not shards")
    if target.shard is not None:
        if seq is not None or split is not None:
            raise InspectError(
                "--seq and --split choose shards of a manifest; give the shards directory, "
                "not one shard"
            )
        return [target.shard]
    manifest = target.manifest
    assert isinstance(manifest, ShardsManifest)
    assert target.manifest_url is not None
    outputs = ordered_outputs(manifest)
    if seq is not None:
        outputs = [(name, out) for name, out in outputs if name == seq_dir(seq)]
        if not outputs:
            have = ", ".join(str(o.max_seq_length) for _, o in ordered_outputs(manifest))
            raise InspectError(
                f"{target.manifest_url} has no {seq_dir(seq)} shards: --seq one of {have}"
            )
    refs = []
    for name, output in outputs:
        splits = ordered_splits(output)
        if split is not None:
            if split not in output.splits:
                raise InspectError(
                    f"{target.manifest_url} has no {split} split under {name} "
                    f"(it has {', '.join(splits)})"
                )
            splits = [split]
        for split_name in splits:
            for info in output.splits[split_name].shards:
                url = shard_url(target.manifest_url, info)
                refs.append(ShardRef(url, info, name, split_name))
    return refs


def max_seq_length_of(target: Target, seq: int | None) -> int | None:
    if not isinstance(target.manifest, ShardsManifest):
        return None
    if target.shard is not None and target.shard.output is not None:
        return target.manifest.outputs[target.shard.output].max_seq_length
    lengths = [o.max_seq_length for o in target.manifest.outputs.values()]
    return seq if seq is not None else max(lengths, default=None)
