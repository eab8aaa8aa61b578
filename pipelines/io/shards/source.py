"""Opening shards: `open_source` resolves a shards directory, its manifest.json (local or a
URL) or a brace pattern of shard URLs → the manifest → one sequence length's output → one
split → the shard list, with sample counts; it is the trainer's first stage
(trainer/source.py, trainer/data.py). `bertkit inspect` (pipelines/inspect/targets.py) finds
shards through the same pieces: `listed_shard` (where a manifest lists a shard named by URL),
`shard_url`, and the order of outputs and splits (`ordered_outputs`, `ordered_splits`); it
parses a manifest and words a missing output or split in its own way, since it shows
manifests the trainer would refuse (`read_manifest` checks the schema version).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pipelines.io import storage
from pipelines.io.retry import RetryPolicy, open_with_retries, range_opener
from pipelines.io.shards.presence import and_more, check_present
from pipelines.io.shards.read import (
    SampleBlock,
    iter_tar_samples,
    read_verified_blocks,
    read_verified_samples,
)
from schemas.checks import MAX_RECORD_BYTES
from schemas.examples import SPLITS
from schemas.shards import (
    SequenceOutput,
    ShardInfo,
    ShardsManifest,
    SplitShards,
    block_table_path,
    seq_dir,
)
from schemas.versions import read_record

_LOG = logging.getLogger(__name__)
# How a probe of the storage before any read (check_present) meets a fault: as a read does.
_POLICY = RetryPolicy()


class DataConfigError(ValueError):
    """The shards cannot feed this run: wrong schema, vocabulary or sequence length."""


class ShardEntry:
    """One shard of a run: its URL, its sample count, and the manifest's entry (sizes, block
    sha256s; None for a shard named by pattern with no manifest, which nothing can verify).

    A shard with no manifest has no count until `samples` is first asked for: it is counted
    then, by reading it once. So whatever refuses such shards first (the trainer needs a
    manifest's vocabulary) refuses before any of them is read in full.
    """

    __slots__ = ("_samples", "info", "url")

    def __init__(self, url: str, samples: int | None, info: ShardInfo | None = None) -> None:
        self.url, self.info, self._samples = url, info, samples

    @property
    def samples(self) -> int:
        if self._samples is None:
            self._samples = _count_samples(self.url)
        return self._samples

    @property
    def bytes(self) -> int | None:
        return self.info.bytes if self.info is not None else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardEntry):
            return NotImplemented
        return (self.url, self.samples, self.info) == (other.url, other.samples, other.info)

    __hash__ = None  # type: ignore[assignment]  (mutable: a count is filled in when needed)

    def __repr__(self) -> str:
        count = "not counted yet" if self._samples is None else self._samples
        return f"ShardEntry({self.url!r}, {count!r}, {self.info!r})"


def _count_samples(url: str) -> int:
    _LOG.warning(
        "%s: not in a manifest; counting its samples by reading it. Nothing can verify its "
        "bytes: train on shards with their manifest.json to have every block checked before "
        "use",
        url,
    )
    with open_with_retries(url, RetryPolicy()) as stream:
        return sum(1 for _ in iter_tar_samples(stream, url))


@dataclass(frozen=True, slots=True)
class DataSource:
    """What a run reads: the shards of one split of one sequence length, with counts."""

    shards: tuple[ShardEntry, ...]
    max_seq_length: int | None  # from the manifest; None for a bare shard list
    split: str
    manifest: ShardsManifest | None = None
    manifest_url: str | None = None

    @property
    def samples(self) -> int:
        return sum(shard.samples for shard in self.shards)

    @property
    def output(self) -> SequenceOutput | None:
        """The manifest's entry for this sequence length; None without a manifest that has
        one."""
        if self.manifest is None or self.max_seq_length is None:
            return None
        return self.manifest.outputs.get(seq_dir(self.max_seq_length))


def open_source(spec: str, split: str = "train", max_seq_length: int | None = None) -> DataSource:
    """Resolve `spec` into shards with sample counts.

    `spec` is a shards directory or its manifest.json (local path or URL: the manifest's
    counts and checksums are used), or a list of shard URLs with brace patterns
    (`s3://b/shards/seq128/train/shard-{000000..000099}.tar`, as webdataset expands them),
    whose manifest is looked for at the usual place, three levels up: where one is there,
    every URL must be a shard it lists (DataConfigError names those it does not: nothing
    could verify their bytes). Shards with no manifest at all are counted by reading them
    once, when their count is first needed (`ShardEntry`), unverified. A shard URL with a
    query (presigned) names that object alone: no manifest is looked for beside it.

    Every shard of the source a manifest lists, and its block table, is checked to be on the
    storage with the size the manifest records before this returns (`check_present`, which
    says what that costs): ShardReadError names one that is missing or of another size.
    """
    from webdataset.shardlists import expand_urls  # the brace expansion webdataset users know

    if storage.basename(spec).endswith(".tar") or "{" in spec or "::" in spec:
        urls = expand_urls(spec)
        return _source_from_urls(urls, split, max_seq_length)
    location = storage.locate(spec)
    if location.kind != "shards":
        raise DataConfigError(
            f"{spec}: a {location.kind} directory, not shards; give the output of "
            "`bertkit examples` (its directory or manifest.json) or shard URLs"
        )
    assert location.manifest_url is not None
    manifest = read_manifest(location.manifest_url)
    return source_of(manifest, location.manifest_url, split, max_seq_length)


def source_of(
    manifest: ShardsManifest, manifest_url: str, split: str, max_seq_length: int | None
) -> DataSource:
    """One split of a manifest already read (the held-out split beside the train one reads
    no manifest twice), its shards checked to be there (`check_present`)."""
    output = _choose_output(manifest, manifest_url, max_seq_length)
    shards = _split_shards(manifest, manifest_url, output, split)
    entries = tuple(ShardEntry(shard_url(manifest_url, s), s.samples, s) for s in shards.shards)
    check_present(
        [(e.url, s) for e, s in zip(entries, shards.shards, strict=True)], manifest_url, _POLICY
    )
    length = manifest.outputs[output].max_seq_length
    return DataSource(entries, length, split, manifest, manifest_url)


def read_manifest(url: str) -> ShardsManifest:
    """A shards manifest, its schema version checked; DataConfigError names the fix."""
    return read_record(
        ShardsManifest,
        storage.read_text(url, MAX_RECORD_BYTES),
        url,
        "rebuild the shards with this bertkit's `bertkit examples`",
        DataConfigError,
    )


def _choose_output(manifest: ShardsManifest, url: str, max_seq_length: int | None) -> str:
    lengths = sorted(out.max_seq_length for out in manifest.outputs.values())
    if max_seq_length is None:
        if len(lengths) != 1:
            raise DataConfigError(
                f"{url} has shards for sequence lengths {lengths}; choose one with --max-seq-length"
            )
        max_seq_length = lengths[0]
    name = seq_dir(max_seq_length)
    if name not in manifest.outputs:
        raise DataConfigError(
            f"{url} has no shards for --max-seq-length {max_seq_length} (it has {lengths}); "
            f"rebuild with `bertkit examples --max-seq-length {max_seq_length}` or pick one "
            "it has"
        )
    return name


def _split_shards(manifest: ShardsManifest, url: str, output: str, split: str) -> SplitShards:
    splits = manifest.outputs[output].splits
    if split not in splits or not splits[split].shards:
        raise DataConfigError(f"{url}: no {split} shards under {output}")
    return splits[split]


def _source_from_urls(urls: list[str], split: str, max_seq_length: int | None) -> DataSource:
    """Shards named one by one: counts and checksums from their manifest if it is where
    bertkit puts it; a shard it does not list is refused. Without a manifest, unverified."""
    if not urls:
        raise DataConfigError("the shard pattern expands to no URL")
    manifest_url, _ = storage.shard_manifest(urls[0])
    if storage.query_of(urls[0]):
        _LOG.warning(
            "%s: a URL with a query names one object (a presigned URL signs that object "
            "alone), so no manifest is looked for beside it",
            storage.redact(urls[0]),
        )
        manifest = None
    else:
        manifest = read_manifest(manifest_url) if storage.exists(manifest_url) else None
        _check_one_manifest(urls, manifest_url, manifest is not None)
    listed = manifest.shards_by_path() if manifest is not None else {}
    entries = []
    length = None
    for url in urls:
        found = listed_shard(url, manifest_url, listed)
        if found is not None:
            output_name, _, info = found
            entries.append(ShardEntry(url, info.samples, info))
            length = manifest.outputs[output_name].max_seq_length  # type: ignore[union-attr]
        else:
            entries.append(ShardEntry(url, None))  # counted when first needed
    if manifest is not None:
        _refuse_unlisted([e.url for e in entries if e.info is None], manifest_url)
        check_present(((e.url, e.info) for e in entries if e.info), manifest_url, _POLICY)
    if max_seq_length is not None and length is not None and length != max_seq_length:
        raise DataConfigError(
            f"{urls[0]}: shards of max_seq_length {length}, the run asks for {max_seq_length}"
        )
    return DataSource(tuple(entries), length, split, manifest, manifest_url if manifest else None)


def _check_one_manifest(urls: list[str], manifest_url: str, found: bool) -> None:
    """Refuse shard URLs that would read shards of a manifest without it: ones of another
    shards directory whose manifest is there (a directory a source, in a mix). With no
    manifest anywhere, say why where it is a bucket that does not exist."""
    places = sorted({storage.shard_manifest(url)[0] for url in urls} - {manifest_url})
    for place in places:
        if storage.exists(place):
            raise DataConfigError(
                f"{urls[0]}: its pattern names shards of two shards directories, this one's "
                f"and those {place} lists: give each directory (or its shards) as a --shards "
                "source of its own"
            )
    if not found and storage.scheme(manifest_url) in ("s3", "gs"):
        from pipelines.io.objects import missing_bucket

        if problem := missing_bucket(manifest_url):
            raise DataConfigError(f"{urls[0]}: {problem}")


def _refuse_unlisted(unlisted: list[str], manifest_url: str) -> None:
    """A shard its manifest does not list reaches no model: nothing could verify its bytes,
    nor record its sha256 for a resume to compare."""
    if not unlisted:
        return
    raise DataConfigError(
        f"{unlisted[0]}{and_more(unlisted)}: not listed in {manifest_url}, the manifest of "
        "the shards there, so nothing could verify its bytes: give only shards it lists (or "
        "the shards "
        f"directory, {storage.parent(manifest_url)}), or rebuild the shards with it"
    )


def listed_shard(
    url: str, manifest_url: str, listed: dict[str, tuple[str, str, ShardInfo]]
) -> tuple[str, str, ShardInfo] | None:
    """Where the manifest at `manifest_url` lists the shard at `url` (its output, its split,
    its entry: `listed` is that manifest's `shards_by_path()`), or None if it does not: a
    shard is listed by its path below the manifest, `SHARD_DEPTH` levels up."""
    url_manifest, relative = storage.shard_manifest(url)
    return listed.get(relative) if url_manifest == manifest_url else None


def shard_url(manifest_url: str, info: ShardInfo) -> str:
    """The URL of a shard the manifest at `manifest_url` lists."""
    return storage.join(storage.parent(manifest_url), info.path)


def ordered_outputs(manifest: ShardsManifest) -> list[tuple[str, SequenceOutput]]:
    """A manifest's outputs, shortest sequence length first."""
    return sorted(manifest.outputs.items(), key=lambda item: item[1].max_seq_length)


def ordered_splits(output: SequenceOutput) -> list[str]:
    """An output's splits, train before heldout (the manifest's JSON has its keys sorted,
    heldout first)."""
    return sorted(output.splits, key=lambda s: (SPLITS.index(s) if s in SPLITS else 99, s))


def read_listed_shard(
    url: str, info: ShardInfo, skip: int, take: int | None, policy: RetryPolicy
) -> Iterator[tuple[str, bytes]]:
    """Samples [skip, skip + take) of a shard its manifest lists (`take` None: to its end),
    read by byte range after its block table, each only once its block's sha256 matched:
    how the trainer and `inspect` both read a verified shard."""
    opener = range_opener(url, policy)
    table = range_opener(block_table_path(url), policy)
    return read_verified_samples(opener, url, info, skip, take, table)


def read_listed_blocks(
    url: str, info: ShardInfo, skip: int, take: int | None, policy: RetryPolicy
) -> Iterator[tuple[int, list[SampleBlock]]]:
    """`read_listed_shard`'s blocks as they are (`read_verified_blocks`): what the training
    loader holds, the samples left in their blocks' bytes until a batch takes them."""
    opener = range_opener(url, policy)
    table = range_opener(block_table_path(url), policy)
    return read_verified_blocks(opener, url, info, skip, take, table)
