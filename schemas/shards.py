"""The manifest of a shards directory (`DIR/manifest.json`), written last.

Layout of `DIR` (`bertkit examples`):
    seq128/train/shard-000000.tar …    WebDataset shards (schemas/examples.py), balanced
    seq128/train/shard-000000.tar.blocks.json …  each shard's block table (below)
    seq128/heldout/shard-000000.tar …  held-out documents' examples
    seq512/…                           one tree per --max-seq-length
    _rejects/rejects-*.jsonl           documents or instances that made no example, and why
    README.md                          the dataset card (Hugging Face's format): licence,
                                       counts, the commands that made it; just before
    manifest.json                      this record

A shard's path names its place: `DIR/seqN/SPLIT/shard-*.tar` is listed in `DIR/manifest.json`
as `seqN/SPLIT/shard-*.tar` (`SHARD_DEPTH` levels below the manifest; `shards_by_path`). The
names are built here and nowhere else: `seq_dir`, `split_dir`, `shard_name`.

**Kinds.** `sequences` says what a sample is: "pairs" (Google's `[CLS] A [SEP] B [SEP]` with
a next-sentence label) or "full-sentences" (RoBERTa's FULL-SENTENCES: contiguous text packed
across documents, segment A its whole length, label 0); `masking` whether it holds masks:
"static" (drawn by the examples stage) or "none" (0 predictions, `max_predictions_per_seq`
0; the trainer draws them). Both are written only when not the defaults, "pairs" and
"static", so a manifest of masked pairs keeps the bytes it had before the fields existed.

A reader checks `schema_version`, `vocab.sha256` and `max_seq_length` before it trusts a
shard, and a block's sha256 before it uses a sample in it. Holds no timestamps or host names:
the same inputs and flags give the same bytes.

**Blocks.** A shard's bytes are cut, at sample boundaries, into blocks of `block_samples`
samples (the last block also holds the end-of-archive bytes), each with its first byte and
sha256 (schema 1.1): the blocks tile the file, so verifying every block verifies the file.
Since schema 2.0 a block is one tar member (schemas/examples.py). A reader that wants samples
[a, b) reads just the blocks holding them, by byte range, and releases a block's samples only
once its sha256 matched: no sample is used before its bytes are verified, memory is one block
(~180 kB at 128 tokens), and a reader of part of a shard does not read the rest.

**Block tables** (schema 2.1). Listed inline, the blocks made the manifest O(blocks): ~170
bytes of indented JSON each, so a billion samples at 128 tokens (1.95 M blocks) would make a
330 MB manifest, past the 256 MiB every reader allows (schemas/checks.py), parsed whole by
every rank. Since 2.1 each shard's blocks are in a small file beside it,
`block_table_path(path)` (`shard-000000.tar.blocks.json`: `{"block_samples", "offsets",
"sha256"}`, compact JSON, ~76 bytes a block), and the manifest records that file's bytes and
sha256 (`block_table`), ~490 bytes a shard whatever its size. A reader fetches a shard's table
when it first reads from the shard, exactly the recorded bytes, and uses it only once its
sha256 matched: the chain manifest → table → block → sample stays verified. 2.0 and 1.1
manifests list the blocks inline (`blocks`) and are still read; a 1.0 manifest has no blocks,
and its reader treats the whole shard as one block.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from schemas.checks import (
    MAX_RECORD_BYTES,
    RecordError,
    load_json,
    need_dict,
    need_int,
    need_list,
    need_relative_path,
    need_sha256,
    need_str,
)
from schemas.examples import (
    BLOCK_SAMPLES,  # samples per verified block: ~0.6 MB at 128 tokens, ~2 MB at 512
    EXAMPLE_MEMBER,
    EXAMPLES_SCHEMA_VERSION,
    MAX_SAMPLE_BYTES,
    READABLE_MAJORS,
    SAMPLES_MEMBER,
    ExampleColumn,
    ExampleDecodeError,
    PretrainingExample,
    sample_key,
    unpack_samples,
)

# What a shards directory holds (the manifest's `sequences` and `masking`, `bertkit examples
# --sequences/--masking`): the first of each is the default, BERT 2018's.
PAIRS, FULL_SENTENCES = "pairs", "full-sentences"
SEQUENCE_KINDS = (PAIRS, FULL_SENTENCES)
STATIC, NO_MASKS = "static", "none"
MASKING_KINDS = (STATIC, NO_MASKS)

DATASET_CARD_NAME = "README.md"  # beside the manifest: pipelines/examples/card.py
# counts["seqN/SPLIT/truncated_tokens"]: the tokens Google's pair rule trimmed off a split's
# pairs to fit the length (absent when none were): a document of overlong sentences loses
# most of its text this way.
TRUNCATED_TOKENS = "truncated_tokens"
SHARD_DEPTH = 3  # seqN/SPLIT/shard-NNNNNN.tar: a shard's manifest is three levels up
BLOCK_TABLE_SUFFIX = ".blocks.json"  # a shard's block table: `shard-000000.tar.blocks.json`


def seq_dir(max_seq_length: int) -> str:
    """The tree of one sequence length, and its key in the manifest's outputs: "seq128"."""
    return f"seq{max_seq_length}"


def split_dir(max_seq_length: int, split: str) -> str:
    """The folder of one split of one sequence length: "seq128/train"."""
    return f"{seq_dir(max_seq_length)}/{split}"


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.tar"


def max_block_bytes(block_samples: int) -> int:
    """The most bytes a block of `block_samples` samples can take in either layout: one tar
    member of them (2.x) or a member each (1.x), headers, padding and the end-of-archive
    blocks included. A block table claiming more is refused before the block is read."""
    return block_samples * (4 + MAX_SAMPLE_BYTES + 2 * 512) + 4 * 512


# A block table lists, per block, an offset (at most 20 digits) and a sha256 (64 hex digits),
# each quoted or comma-separated: a table is at most this many bytes a block, plus its keys.
_TABLE_BYTES_PER_BLOCK = 90
_TABLE_BYTES_FIXED = 64


def max_block_table_bytes(samples: int, block_samples: int) -> int:
    """The most bytes the block table of a shard of `samples` samples can take: its read is
    bounded by what the manifest says the shard holds, not only by MAX_RECORD_BYTES."""
    blocks = max(1, -(-samples // block_samples))
    return min(MAX_RECORD_BYTES, _TABLE_BYTES_FIXED + _TABLE_BYTES_PER_BLOCK * blocks)


def block_table_path(shard_path: str) -> str:
    """Where a shard's block table is (a relative path or a URL): beside it, named after it."""
    return shard_path + BLOCK_TABLE_SUFFIX


@dataclass(frozen=True, slots=True)
class ShardBlock:
    offset: int  # the block's first byte in the shard; it ends where the next one starts
    sha256: str


@dataclass(frozen=True, slots=True)
class BlockTableFile:
    """What a 2.1 manifest records of a shard's block table: its size and sha256."""

    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class BlockSpan:
    """One block of a shard as a reader uses it: samples [first, stop), bytes [start, end)."""

    first: int
    stop: int
    start: int
    end: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ShardInfo:
    path: str  # relative to the manifest's directory, e.g. "seq128/train/shard-000000.tar"
    samples: int
    bytes: int
    sha256: str
    first_key: str  # keys are positions in the split: shard i holds first_key … + samples - 1
    block_samples: int = 0  # 0: no blocks (a 1.0 manifest)
    blocks: tuple[ShardBlock, ...] = ()  # inline (1.1, 2.0), or loaded from the block table
    block_table: BlockTableFile | None = None  # 2.1: the blocks are in block_table_path(path)

    def spans(self) -> list[BlockSpan]:
        """The blocks as sample and byte ranges; without blocks, the whole shard is one."""
        if not self.blocks and self.block_table is not None:
            raise ValueError(f"{self.path}: its block table is not loaded (with_blocks)")
        if not self.blocks:
            return [BlockSpan(0, self.samples, 0, self.bytes, self.sha256)]
        ends = [block.offset for block in self.blocks[1:]] + [self.bytes]
        return [
            BlockSpan(
                i * self.block_samples,
                min((i + 1) * self.block_samples, self.samples),
                block.offset,
                end,
                block.sha256,
            )
            for i, (block, end) in enumerate(zip(self.blocks, ends, strict=True))
        ]

    def with_table_file(self, table: bytes) -> ShardInfo:
        """This entry as a 2.1 manifest lists it: its blocks moved out to `table` (the bytes
        of its block table file, `encode_block_table(self)`), recorded by size and sha256."""
        digest = hashlib.sha256(table).hexdigest()
        return replace(self, blocks=(), block_table=BlockTableFile(len(table), digest))

    def with_blocks(self, table: bytes, where: str) -> ShardInfo:
        """This entry with its blocks read from the bytes of its block table (already checked
        against `block_table`): they must tile the shard as the manifest describes it."""
        return replace(self, blocks=decode_block_table(table, self, where))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ShardInfo:
        blocks = raw.get("blocks", [])
        if not isinstance(blocks, list | tuple) or not all(isinstance(b, dict) for b in blocks):
            raise RecordError("blocks must be a list of {offset, sha256} objects")
        table = raw.get("block_table")
        if table is not None and not isinstance(table, dict):
            raise RecordError("block_table must be a {bytes, sha256} object")
        return cls(
            **{
                **raw,
                "blocks": tuple(ShardBlock(**block) for block in blocks),
                "block_table": BlockTableFile(**table) if table is not None else None,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """The manifest's entry: `blocks` only when inline, `block_table` only when 2.1."""
        raw = asdict(self)
        if not self.blocks:
            del raw["blocks"]
        if self.block_table is None:
            del raw["block_table"]
        return raw


def encode_block_table(info: ShardInfo) -> bytes:
    """The bytes of a shard's block table file, from an entry with its blocks inline: compact
    JSON, keys sorted, so the same shard gives the same bytes."""
    record = {
        "block_samples": info.block_samples,
        "offsets": [block.offset for block in info.blocks],
        "sha256": [block.sha256 for block in info.blocks],
    }
    return (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode("ascii")


def decode_block_table(table: bytes, info: ShardInfo, where: str) -> tuple[ShardBlock, ...]:
    """A block table's blocks, checked against the shard's entry (RecordError naming
    `where` and the field otherwise)."""
    try:
        raw = load_json(table)
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise RecordError(f"{where}: not a block table ({error})") from error
    need_dict(raw, where)
    if sorted(raw) != ["block_samples", "offsets", "sha256"]:
        raise RecordError(
            f"{where}: fields {sorted(raw)}, a block table has block_samples, offsets and sha256"
        )
    if raw["block_samples"] != info.block_samples:
        raise RecordError(
            f"{where}.block_samples is {raw['block_samples']!r}, the manifest says "
            f"{info.block_samples}"
        )
    need_list(raw["offsets"], f"{where}.offsets")
    need_list(raw["sha256"], f"{where}.sha256")
    if len(raw["offsets"]) != len(raw["sha256"]):
        raise RecordError(
            f"{where}: {len(raw['offsets'])} offsets but {len(raw['sha256'])} sha256s"
        )
    blocks = tuple(ShardBlock(o, h) for o, h in zip(raw["offsets"], raw["sha256"], strict=True))
    if not blocks:
        raise RecordError(f"{where}: no blocks; a shard has one at least")
    _check_blocks(replace(info, blocks=blocks), where)
    return blocks


@dataclass(slots=True)
class SplitShards:
    samples: int
    not_next: int  # examples with next_sentence_label = 1
    tokens: int  # sum of input lengths
    predictions: int  # sum of masked_lm_positions lengths
    shards: list[ShardInfo]


def _check_split(split: SplitShards, where: str) -> None:
    for name in ("samples", "not_next", "tokens", "predictions"):
        need_int(getattr(split, name), f"{where}.{name}")
    for index, info in enumerate(split.shards):
        field = f"{where}.shards[{index}]"
        need_relative_path(info.path, f"{field}.path")
        need_int(info.samples, f"{field}.samples")
        need_int(info.bytes, f"{field}.bytes", 1024)  # a tar ends with two 512-byte blocks
        need_sha256(info.sha256, f"{field}.sha256")
        need_str(info.first_key, f"{field}.first_key")
        _check_blocks(info, field)
        _check_block_table(info, field)
    listed = sum(info.samples for info in split.shards)
    if listed != split.samples:
        raise RecordError(
            f"{where}: its shards hold {listed} samples, `samples` says {split.samples}"
        )


def _check_blocks(info: ShardInfo, where: str) -> None:
    """Blocks tile the shard: first at byte 0, rising by whole tar blocks, one per
    `block_samples` samples."""
    if not info.blocks:
        return
    need_int(info.block_samples, f"{where}.block_samples", 1, BLOCK_SAMPLES)
    expected = max(1, -(-info.samples // info.block_samples))
    if len(info.blocks) != expected:
        raise RecordError(
            f"{where}.blocks: {len(info.blocks)} blocks, {info.samples} samples in blocks of "
            f"{info.block_samples} make {expected}"
        )
    previous = -1
    for index, block in enumerate(info.blocks):
        field = f"{where}.blocks[{index}]"
        need_int(block.offset, f"{field}.offset", previous + 1, info.bytes - 1024)
        if block.offset % 512 or (index == 0 and block.offset):
            raise RecordError(
                f"{field}.offset is {block.offset}: blocks start at byte 0, then on tar "
                "block (512-byte) boundaries"
            )
        need_sha256(block.sha256, f"{field}.sha256")
        previous = block.offset
    largest = max_block_bytes(info.block_samples)
    ends = [block.offset for block in info.blocks[1:]] + [info.bytes]
    for index, (block, end) in enumerate(zip(info.blocks, ends, strict=True)):
        if end - block.offset > largest:
            raise RecordError(
                f"{where}.blocks[{index}]: {end - block.offset:,} bytes (from byte "
                f"{block.offset:,}), more than any block of {info.block_samples} samples takes "
                f"({largest:,})"
            )


def _check_block_table(info: ShardInfo, where: str) -> None:
    """A 2.1 entry's block table file: its blocks are there, not inline as well."""
    table = info.block_table
    if table is None:
        return
    if info.blocks:
        raise RecordError(f"{where}: lists blocks inline and a block_table; one or the other")
    need_int(info.block_samples, f"{where}.block_samples", 1, BLOCK_SAMPLES)
    largest = max_block_table_bytes(info.samples, info.block_samples)
    need_int(table.bytes, f"{where}.block_table.bytes", 1, largest)
    need_sha256(table.sha256, f"{where}.block_table.sha256")


@dataclass(slots=True)
class SequenceOutput:
    max_seq_length: int
    max_predictions_per_seq: int
    splits: dict[str, SplitShards]  # "train", "heldout"


@dataclass(slots=True)
class ShardsManifest:
    # Paths to other artifacts are relative to this manifest's directory ("../vocab"), or
    # absolute, or URLs (docs/formats.md, "Paths between artifacts"); older manifests hold
    # them as typed where the stage ran, relative to that working directory.
    vocab: dict[str, Any]  # {"path", "sha256", "size", "cased"}
    inputs: list[dict[str, Any]]  # documents directories: {"path", "manifest_sha256", …}
    config: dict[str, Any]  # every flag, resolved
    layout: dict[str, Any]  # derived sizes: partner groups, partitions, buckets, id width
    deviations: list[str]  # where the algorithm deliberately differs from Google's
    counts: dict[str, int]  # documents, sentences, tokens, per split, …
    dropped: dict[str, int]  # reason → count (filtered on purpose, e.g. empty sentences)
    rejected: dict[str, int]  # reason → count (see _rejects/)
    outputs: dict[str, SequenceOutput]  # "seq128" → …
    rejects_files: list[str] = field(default_factory=list)
    member: str = SAMPLES_MEMBER
    record: str = "PretrainingExample"
    schema_version: str = EXAMPLES_SCHEMA_VERSION
    bertkit_version: str = "0.1.0"
    sequences: str = PAIRS  # SEQUENCE_KINDS: what each sample is
    masking: str = STATIC  # MASKING_KINDS: whether samples hold masks
    READABLE_MAJORS: ClassVar[tuple[str, ...]] = READABLE_MAJORS  # 1.x: a member per sample

    def to_json(self) -> str:
        """The manifest's bytes. `sequences` and `masking` are written only when not the
        defaults (and read as the defaults when absent), so a manifest of masked pairs is
        byte for byte what it was before the fields existed."""
        raw = asdict(self)
        for name, default in (("sequences", PAIRS), ("masking", STATIC)):
            if raw[name] == default:
                del raw[name]
        for name, output in self.outputs.items():
            for split, shards in output.splits.items():
                raw["outputs"][name]["splits"][split]["shards"] = [
                    info.to_dict() for info in shards.shards
                ]
        return json.dumps(raw, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ShardsManifest:
        raw = load_json(text)
        raw["outputs"] = {
            name: SequenceOutput(
                max_seq_length=out["max_seq_length"],
                max_predictions_per_seq=out["max_predictions_per_seq"],
                splits={
                    split: SplitShards(
                        **{**shards, "shards": [ShardInfo.from_dict(s) for s in shards["shards"]]}
                    )
                    for split, shards in out["splits"].items()
                },
            )
            for name, out in raw["outputs"].items()
        }
        manifest = cls(**raw)
        manifest.validate()
        return manifest

    def validate(self) -> None:
        """Types, ranges and paths of every field a reader relies on (schemas/checks.py)."""
        need_dict(self.vocab, "vocab")
        self._check_kind()
        if "size" in self.vocab:
            need_int(self.vocab["size"], "vocab.size", 1)
        if "sha256" in self.vocab:
            need_sha256(self.vocab["sha256"], "vocab.sha256")
        for name, output in self.outputs.items():
            where = f"outputs.{name}"
            need_int(output.max_seq_length, f"{where}.max_seq_length", 8, 65535)
            field_name = f"{where}.max_predictions_per_seq"
            need_int(output.max_predictions_per_seq, field_name, 1 if self.masking == STATIC else 0)
            if self.masking == NO_MASKS and output.max_predictions_per_seq:
                raise RecordError(
                    f"{field_name} is {output.max_predictions_per_seq}: samples made with "
                    "masking none hold no predictions (0)"
                )
            for split, shards in output.splits.items():
                _check_split(shards, f"{where}.splits.{split}")
                if self.sequences == FULL_SENTENCES and shards.not_next:
                    raise RecordError(
                        f"{where}.splits.{split}.not_next is {shards.not_next}: full-sentence "
                        "sequences have no next-sentence label"
                    )
                if self.masking == NO_MASKS and shards.predictions:
                    raise RecordError(
                        f"{where}.splits.{split}.predictions is {shards.predictions}: samples "
                        "made with masking none hold no predictions"
                    )

    def _check_kind(self) -> None:
        for name, kinds in (("sequences", SEQUENCE_KINDS), ("masking", MASKING_KINDS)):
            value = getattr(self, name)
            if value not in kinds:
                raise RecordError(f"{name} is {value!r}: one of {', '.join(map(repr, kinds))}")

    def shards_by_path(self) -> dict[str, tuple[str, str, ShardInfo]]:
        """Relative shard path → (output name, split, info), for finding a shard named alone."""
        return {
            info.path: (name, split, info)
            for name, output in self.outputs.items()
            for split, shards in output.splits.items()
            for info in shards.shards
        }

    def all_shards(self) -> list[ShardInfo]:
        return [
            shard
            for out in self.outputs.values()
            for split in out.splits.values()
            for shard in split.shards
        ]


# --- Reading the shards with plain webdataset ------------------------------------------------

# The fields of a sample `decode_block` gives: the Arrow view's (PRETRAINING_EXAMPLE_SCHEMA),
# its key as webdataset names keys, and webdataset's `__url__`.
WEBDATASET_FIELDS = (
    "__key__",
    "__url__",
    ExampleColumn.INPUT_IDS,
    ExampleColumn.SEGMENT_IDS,
    ExampleColumn.MASKED_LM_POSITIONS,
    ExampleColumn.MASKED_LM_IDS,
    ExampleColumn.NEXT_SENTENCE_LABEL,
    ExampleColumn.DOC_A,
    ExampleColumn.DOC_B,
    ExampleColumn.DUPE_PASS,
)


def unpack_blocks(records: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The samples of webdataset records of bertkit shards, one dict each, in order: a
    pipeline stage for webdataset's `.compose`:

        import webdataset as wds
        from schemas.shards import unpack_blocks
        samples = wds.WebDataset(urls, shardshuffle=False).compose(unpack_blocks)

    (A stage of its own, not `.map(...).unbatched()`: webdataset's `.map` sets the block's
    key on whatever dict the function returns, which `.unbatched()` then cannot split.)
    """
    for record in records:
        yield from decode_block(record)


def decode_block(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One webdataset record of a shard (a block of up to 512 samples) as its samples.

    Each sample is a dict of WEBDATASET_FIELDS: its own `__key__` (its position in the split,
    12 digits, as `bertkit inspect --json` and the trainer number it), the shard's `__url__`
    (None if the record has none), the ids as int32 numpy arrays, the label and dupe pass as
    ints. A 1.x record (one sample, member `example.bin`) gives one sample.
    ExampleDecodeError names the record when it is not a bertkit shard's.
    """
    key = str(record.get("__key__", ""))
    if SAMPLES_MEMBER in record:
        try:
            first = int(key)
        except ValueError as error:
            raise ExampleDecodeError(
                f"block {key!r}: a block's key is its first sample's position (digits)"
            ) from error
        packed = unpack_samples(bytes(record[SAMPLES_MEMBER]))
        keys = [sample_key(first + index) for index in range(len(packed))]
    elif EXAMPLE_MEMBER in record:
        packed, keys = [bytes(record[EXAMPLE_MEMBER])], [key]
    else:
        members = sorted(name for name in record if not name.startswith("__"))
        raise ExampleDecodeError(
            f"record {key!r} holds {members}, neither {SAMPLES_MEMBER} (a block of samples) "
            f"nor {EXAMPLE_MEMBER}: not a bertkit shard's record"
        )
    url = record.get("__url__")
    samples = []
    for own_key, data in zip(keys, packed, strict=True):
        example = PretrainingExample.decode(data, own_key)
        samples.append(
            {
                "__key__": own_key,
                "__url__": url,
                ExampleColumn.INPUT_IDS: example.input_ids.astype(np.int32),
                ExampleColumn.SEGMENT_IDS: example.segment_ids,
                ExampleColumn.MASKED_LM_POSITIONS: example.masked_lm_positions.astype(np.int32),
                ExampleColumn.MASKED_LM_IDS: example.masked_lm_ids.astype(np.int32),
                ExampleColumn.NEXT_SENTENCE_LABEL: int(example.next_sentence_label),
                ExampleColumn.DOC_A: example.doc_a,
                ExampleColumn.DOC_B: example.doc_b,
                ExampleColumn.DUPE_PASS: int(example.dupe_pass),
            }
        )
    return samples
