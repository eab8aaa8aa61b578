"""The PretrainingExample record and how it is laid out in WebDataset shards.

A shard is a plain tar file. Since schema 2.0 each tar member holds one *block* of samples,
`<first key>.examples.bin` (`SAMPLES_MEMBER`): up to 512 consecutive samples (the manifest's
`block_samples`), packed as

    magic b"BKB1", count (uint32), count × uint32 sample lengths, the samples back to back

so a sample pays 4 bytes of framing and the tar header and padding (~1 kB) are paid once per
block: a little over the payload on disk, against nearly three times it for one member per
sample (schema 1.x, whose `<key>.example.bin` members readers still accept;
docs/benchmarks.md gives the bytes). Sample i of a block has the key
`first key + i` (keys are positions in the split, 12 digits). `webdataset.WebDataset(url)`
yields one record per block; `unpack_samples(record["examples.bin"])` gives its samples'
bytes. A sample is one PretrainingExample in a packed little-endian layout (no pickle, no
padding):

    header (18 bytes)  magic b"BKX1", id width (2 or 4 bytes), next_sentence_label,
                       dupe pass, number of tokens, segment-A length, number of
                       predictions, bytes of doc_a, bytes of doc_b
    input_ids          n_tokens × id width        [CLS] A [SEP] B [SEP], masks applied
    masked_lm_positions n_predictions × uint16    ascending
    masked_lm_ids      n_predictions × id width   the original tokens at those positions
    doc_a, doc_b       UTF-8                      provenance: the documents A and B came from
                                                  (doc_b stored empty: the same as doc_a)

Segment ids are not stored: they are 0 for the first `segment_a_length` tokens ([CLS] A
[SEP]) and 1 after. A full-sentence sample (the shards manifest's `sequences`) is one
segment: `segment_a_length` is its length, its label 0, and doc_a and doc_b its first and
last document. A sample of shards made with `masking` none has no predictions. The id width
is the smallest the vocabulary allows (2 bytes up to 65,536 ids), so an example is a
fraction of Google's padded tf.train.Example (docs/benchmarks.md, `python -m bench.examples`).

`PRETRAINING_EXAMPLE_SCHEMA` is the Arrow view of a decoded sample: what `bertkit inspect
--schema` prints, what `examples_table` builds and what the trainer's decoder yields;
`PRETRAINING_EXAMPLE_TOKENS_SCHEMA` is the same with the ids' token strings beside them
(`tokens`, `masked_lm_tokens`), what `bertkit inspect --parquet` writes with a vocabulary.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

# 1.1: the shards manifest records per-block sha256s; 2.0: one tar member per block; 2.1: a
# shard's blocks are in a block table file beside it, the manifest records its sha256.
EXAMPLES_SCHEMA_VERSION = "2.1"
READABLE_MAJORS = ("1", "2")  # 1.x shards (a member per sample) are still read
SAMPLES_MEMBER = "examples.bin"  # a block of samples: `<first key>.examples.bin` (2.0)
EXAMPLE_MEMBER = "example.bin"  # one sample: `<key>.example.bin` (1.x, read only)
SHARDS_MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "heldout")
NOT_NEXT = 1  # next_sentence_label: 0 = IsNext, 1 = NotNext (Google's and HF's convention)
IS_NEXT = 0

_MAGIC = b"BKX1"
_HEADER = struct.Struct("<4sBBHHHHHH")
HEADER_BYTES = _HEADER.size
_ID_DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}
POSITION_DTYPE = np.dtype("<u2")


class ExampleColumn:
    """Column names of the PretrainingExample schema."""

    KEY = "key"
    INPUT_IDS = "input_ids"
    SEGMENT_IDS = "segment_ids"
    MASKED_LM_POSITIONS = "masked_lm_positions"
    MASKED_LM_IDS = "masked_lm_ids"
    NEXT_SENTENCE_LABEL = "next_sentence_label"
    DOC_A = "doc_a"
    DOC_B = "doc_b"
    DUPE_PASS = "dupe_pass"
    # Only in PRETRAINING_EXAMPLE_TOKENS_SCHEMA: the ids' strings, from the vocabulary.
    TOKENS = "tokens"
    MASKED_LM_TOKENS = "masked_lm_tokens"


# The five fields `bertkit inspect --json` prints, Google's feature names.
TRAINING_FIELDS = (
    ExampleColumn.INPUT_IDS,
    ExampleColumn.SEGMENT_IDS,
    ExampleColumn.MASKED_LM_POSITIONS,
    ExampleColumn.MASKED_LM_IDS,
    ExampleColumn.NEXT_SENTENCE_LABEL,
)

PRETRAINING_EXAMPLE_SCHEMA = pa.schema(
    [
        pa.field(
            ExampleColumn.KEY,
            pa.string(),
            nullable=False,
            metadata={"doc": "WebDataset __key__: the sample's position in its split, 12 digits"},
        ),
        pa.field(
            ExampleColumn.INPUT_IDS,
            pa.list_(pa.int32()),
            nullable=False,
            metadata={"doc": "[CLS] A [SEP] B [SEP], unpadded, masked tokens replaced"},
        ),
        pa.field(
            ExampleColumn.SEGMENT_IDS,
            pa.list_(pa.int8()),
            nullable=False,
            metadata={"doc": "0 for [CLS] A [SEP], 1 for B [SEP]; stored as A's length"},
        ),
        pa.field(
            ExampleColumn.MASKED_LM_POSITIONS,
            pa.list_(pa.int32()),
            nullable=False,
            metadata={"doc": "positions of the predicted tokens, ascending"},
        ),
        pa.field(
            ExampleColumn.MASKED_LM_IDS,
            pa.list_(pa.int32()),
            nullable=False,
            metadata={"doc": "original token ids at masked_lm_positions (the MLM labels)"},
        ),
        pa.field(
            ExampleColumn.NEXT_SENTENCE_LABEL,
            pa.int8(),
            nullable=False,
            metadata={"doc": "0 = IsNext (B follows A), 1 = NotNext (B from another document)"},
        ),
        pa.field(ExampleColumn.DOC_A, pa.string(), False, {"doc": "id of A's document"}),
        pa.field(ExampleColumn.DOC_B, pa.string(), False, {"doc": "id of B's document"}),
        pa.field(
            ExampleColumn.DUPE_PASS,
            pa.int16(),
            nullable=False,
            metadata={"doc": "which of the --dupe-factor passes over the corpus made it"},
        ),
    ],
    metadata={
        "bertkit.record": "PretrainingExample",
        "bertkit.schema_version": EXAMPLES_SCHEMA_VERSION,
    },
)


# The same record with the ids decoded beside them (`bertkit inspect --parquet` with a
# vocabulary): what a reader of the Parquet export queries without a vocab.txt at hand.
PRETRAINING_EXAMPLE_TOKENS_SCHEMA = pa.schema(
    [
        *PRETRAINING_EXAMPLE_SCHEMA,
        pa.field(
            ExampleColumn.TOKENS,
            pa.list_(pa.string()),
            nullable=False,
            metadata={"doc": "the vocabulary's token for each of input_ids ([MASK] where masked)"},
        ),
        pa.field(
            ExampleColumn.MASKED_LM_TOKENS,
            pa.list_(pa.string()),
            nullable=False,
            metadata={"doc": "the vocabulary's token for each of masked_lm_ids (the MLM labels)"},
        ),
    ],
    metadata=PRETRAINING_EXAMPLE_SCHEMA.metadata,
)


class ExampleDecodeError(ValueError):
    """A sample's bytes are not a PretrainingExample."""


class ExampleHeader(NamedTuple):
    """The fixed-size front of a packed sample; what the trainer's collate reads."""

    id_dtype: np.dtype
    next_sentence_label: int
    dupe_pass: int
    n_tokens: int
    segment_a_length: int
    n_predictions: int
    n_doc_a: int
    n_doc_b: int

    # Byte offsets of the arrays after the header.
    @property
    def positions_offset(self) -> int:
        return HEADER_BYTES + self.n_tokens * self.id_dtype.itemsize

    @property
    def labels_offset(self) -> int:
        return self.positions_offset + self.n_predictions * POSITION_DTYPE.itemsize


def read_header(data: bytes, key: str = "") -> ExampleHeader:
    """Parse and check a sample's header: ExampleDecodeError unless its sizes add up."""
    if len(data) < _HEADER.size or data[:4] != _MAGIC:
        raise ExampleDecodeError(
            f"sample {key or '?'}: not a bertkit PretrainingExample "
            f"(starts {bytes(data[:4])!r}, expected {_MAGIC!r})"
        )
    _magic, width, label, dupe_pass, n_tokens, a_length, n_pred, n_doc_a, n_doc_b = (
        _HEADER.unpack_from(data)
    )
    dtype = _ID_DTYPES.get(width)
    expected = _HEADER.size + n_tokens * width + n_pred * (2 + width) + n_doc_a + n_doc_b
    if dtype is None or len(data) != expected:
        raise ExampleDecodeError(
            f"sample {key or '?'}: {len(data)} bytes, header says {expected} "
            f"(id width {width}); the sample is truncated or corrupt"
        )
    return ExampleHeader(dtype, label, dupe_pass, n_tokens, a_length, n_pred, n_doc_a, n_doc_b)


def id_width_for_vocab(vocab_size: int) -> int:
    """Bytes per token id: 2 while every id fits in uint16, else 4."""
    return 2 if vocab_size <= 1 << 16 else 4


def sample_key(position: int) -> str:
    return f"{position:012d}"


_BLOCK_MAGIC = b"BKB1"
_BLOCK_HEADER = struct.Struct("<4sI")
BLOCK_SAMPLES = 512  # the most samples a block holds: the writer's block, and the format's bound
# The largest sample the header can describe (its counts are uint16, ids up to 4 bytes), and
# so the largest block: what a reader allows a tar header or a block's count to claim before
# it reads, so that a lying header costs an error, not the memory it claims.
MAX_SAMPLE_BYTES = HEADER_BYTES + 0xFFFF * (4 + POSITION_DTYPE.itemsize + 4) + 2 * 0xFFFF
MAX_BLOCK_MEMBER_BYTES = _BLOCK_HEADER.size + BLOCK_SAMPLES * (4 + MAX_SAMPLE_BYTES)


def pack_samples(samples: Sequence[bytes]) -> bytes:
    """A block member's bytes: magic, count, the samples' lengths, the samples."""
    lengths = np.fromiter((len(s) for s in samples), dtype="<u4", count=len(samples))
    return b"".join([_BLOCK_HEADER.pack(_BLOCK_MAGIC, len(samples)), lengths.tobytes(), *samples])


def unpack_samples(data: bytes) -> list[bytes]:
    """The samples' bytes of a block member; ExampleDecodeError if it is not one."""
    starts, ends = sample_bounds(data)
    view = memoryview(data)
    return [bytes(view[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def sample_bounds(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Where a block member's samples lie in it: (starts, ends), int64 byte offsets, sample i
    being data[starts[i]:ends[i]]; ExampleDecodeError if it is not a block. What a reader
    that keeps the block's bytes, not a bytes object per sample, holds."""
    if len(data) < _BLOCK_HEADER.size:
        raise ExampleDecodeError(f"a block of {len(data)} bytes is shorter than its header")
    magic, count = _BLOCK_HEADER.unpack_from(data)
    if magic == _BLOCK_MAGIC and count > BLOCK_SAMPLES:  # refused before a bytes object each
        raise ExampleDecodeError(
            f"a block of {count:,} samples, and a block holds at most {BLOCK_SAMPLES}"
        )
    table_end = _BLOCK_HEADER.size + 4 * count
    if magic != _BLOCK_MAGIC or table_end > len(data):
        raise ExampleDecodeError(
            f"not a block of samples (magic {magic!r}, {count} samples in {len(data)} bytes)"
        )
    ends = (
        np.cumsum(
            np.frombuffer(data, dtype="<u4", count=count, offset=_BLOCK_HEADER.size), dtype=np.int64
        )
        + table_end
    )
    if count and int(ends[-1]) != len(data):
        raise ExampleDecodeError(
            f"a block's {count} sample lengths add up to {int(ends[-1]) - table_end} bytes, "
            f"it holds {len(data) - table_end}"
        )
    starts = np.empty_like(ends)
    starts[:1] = table_end
    starts[1:] = ends[:-1]
    return starts, ends


@dataclass(slots=True)
class PretrainingExample:
    input_ids: np.ndarray  # (n_tokens,) unsigned ints
    segment_a_length: int  # tokens with segment id 0: [CLS] A [SEP]
    masked_lm_positions: np.ndarray  # (n_predictions,) ascending
    masked_lm_ids: np.ndarray  # (n_predictions,)
    next_sentence_label: int
    doc_a: str
    doc_b: str
    dupe_pass: int
    key: str = ""  # the WebDataset __key__, set when read from a shard

    @property
    def segment_ids(self) -> np.ndarray:
        segments = np.ones(len(self.input_ids), dtype=np.int8)
        segments[: self.segment_a_length] = 0
        return segments

    def encode(self, id_width: int) -> bytes:
        tokens, predictions = len(self.input_ids), len(self.masked_lm_positions)
        (data,) = encode_examples(
            id_width,
            np.asarray(self.input_ids),
            [(0, tokens)],
            [self.segment_a_length],
            np.asarray(self.masked_lm_positions),
            [(0, predictions)],
            np.asarray(self.masked_lm_ids),
            [self.next_sentence_label],
            [(self.doc_a.encode("utf-8"), self.doc_b.encode("utf-8"))],
            self.dupe_pass,
        )
        return data

    @classmethod
    def decode(cls, data: bytes, key: str = "") -> PretrainingExample:
        header = read_header(data, key)
        dtype = header.id_dtype
        input_ids = np.frombuffer(data, dtype=dtype, count=header.n_tokens, offset=HEADER_BYTES)
        positions = np.frombuffer(
            data, dtype=POSITION_DTYPE, count=header.n_predictions, offset=header.positions_offset
        )
        masked_ids = np.frombuffer(
            data, dtype=dtype, count=header.n_predictions, offset=header.labels_offset
        )
        offset = header.labels_offset + header.n_predictions * dtype.itemsize
        doc_a = bytes(data[offset : offset + header.n_doc_a]).decode("utf-8")
        offset += header.n_doc_a
        doc_b = bytes(data[offset : offset + header.n_doc_b]).decode("utf-8") or doc_a
        return cls(
            input_ids,
            header.segment_a_length,
            positions,
            masked_ids,
            header.next_sentence_label,
            doc_a,
            doc_b,
            header.dupe_pass,
            key,
        )

    def training_fields(self) -> dict[str, list[int] | int]:
        """The five fields a BERT trainer consumes, as plain ints (`inspect --json`)."""
        return {
            ExampleColumn.INPUT_IDS: self.input_ids.tolist(),
            ExampleColumn.SEGMENT_IDS: self.segment_ids.tolist(),
            ExampleColumn.MASKED_LM_POSITIONS: self.masked_lm_positions.tolist(),
            ExampleColumn.MASKED_LM_IDS: self.masked_lm_ids.tolist(),
            ExampleColumn.NEXT_SENTENCE_LABEL: int(self.next_sentence_label),
        }


def encode_examples(
    id_width: int,
    input_ids: np.ndarray,
    token_bounds: Iterable[tuple[int, int]],
    segment_a_lengths: Iterable[int],
    masked_lm_positions: np.ndarray,
    prediction_bounds: Iterable[tuple[int, int]],
    masked_lm_ids: np.ndarray,
    next_sentence_labels: Iterable[int],
    docs: Iterable[tuple[bytes, bytes]],
    dupe_pass: int,
) -> list[bytes]:
    """Many examples' bytes at once (the layout `PretrainingExample.encode` writes; it calls
    this for one), from arrays laid end to end: example i's tokens are `input_ids[a:b]` for
    its (a, b) of `token_bounds`, its positions and labels those of `prediction_bounds`;
    `docs` gives its documents' ids, UTF-8 encoded. Each array is turned into bytes once,
    not three small arrays per example."""
    dtype = _ID_DTYPES[id_width]
    position_width = POSITION_DTYPE.itemsize
    ids = np.ascontiguousarray(input_ids, dtype=dtype).tobytes()
    positions = np.ascontiguousarray(masked_lm_positions, dtype=POSITION_DTYPE).tobytes()
    labels = np.ascontiguousarray(masked_lm_ids, dtype=dtype).tobytes()
    pack = _HEADER.pack
    return [
        b"".join(
            (
                pack(
                    _MAGIC,
                    id_width,
                    label,
                    dupe_pass,
                    end - start,
                    a_length,
                    last - first,
                    len(doc_a),
                    len(doc_b),
                ),
                ids[start * id_width : end * id_width],
                positions[first * position_width : last * position_width],
                labels[first * id_width : last * id_width],
                doc_a,
                doc_b,
            )
        )
        for (start, end), a_length, (first, last), label, (doc_a, doc_b) in zip(
            token_bounds,
            segment_a_lengths,
            prediction_bounds,
            next_sentence_labels,
            docs,
            strict=True,
        )
    ]


def examples_table(
    examples: Iterable[PretrainingExample], tokens: Sequence[str] | None = None
) -> pa.Table:
    """Decoded examples as an Arrow table of PRETRAINING_EXAMPLE_SCHEMA, built column by
    column (no Python object per token); with the vocabulary's `tokens` (id → string, every
    id of the examples below its length), of PRETRAINING_EXAMPLE_TOKENS_SCHEMA."""
    examples = list(examples)
    schema = PRETRAINING_EXAMPLE_SCHEMA if tokens is None else PRETRAINING_EXAMPLE_TOKENS_SCHEMA
    ids = _list_column([e.input_ids for e in examples], pa.int32())
    labels = _list_column([e.masked_lm_ids for e in examples], pa.int32())
    lengths = np.diff(ids.offsets.to_numpy())
    # Segment ids from A's length: position within the example >= segment_a_length → 1.
    starts = np.repeat(ids.offsets.to_numpy()[:-1], lengths)
    a_lengths = np.repeat(np.fromiter((e.segment_a_length for e in examples), np.int64), lengths)
    segments = (np.arange(len(starts)) - starts >= a_lengths).astype(np.int8)
    columns = {
        ExampleColumn.KEY: pa.array([e.key for e in examples], pa.string()),
        ExampleColumn.INPUT_IDS: ids,
        ExampleColumn.SEGMENT_IDS: pa.ListArray.from_arrays(ids.offsets, pa.array(segments)),
        ExampleColumn.MASKED_LM_POSITIONS: _list_column(
            [e.masked_lm_positions for e in examples], pa.int32()
        ),
        ExampleColumn.MASKED_LM_IDS: labels,
        ExampleColumn.NEXT_SENTENCE_LABEL: pa.array(
            [e.next_sentence_label for e in examples], pa.int8()
        ),
        ExampleColumn.DOC_A: pa.array([e.doc_a for e in examples], pa.string()),
        ExampleColumn.DOC_B: pa.array([e.doc_b for e in examples], pa.string()),
        ExampleColumn.DUPE_PASS: pa.array([e.dupe_pass for e in examples], pa.int16()),
    }
    if tokens is not None:
        strings = pa.array(tokens, pa.string())
        for column, source in (
            (ExampleColumn.TOKENS, ids),
            (ExampleColumn.MASKED_LM_TOKENS, labels),
        ):
            columns[column] = pa.ListArray.from_arrays(source.offsets, strings.take(source.values))
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def _list_column(arrays: Sequence[np.ndarray], value_type: pa.DataType) -> pa.ListArray:
    lengths = np.fromiter((len(a) for a in arrays), np.int64, len(arrays))
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.concatenate(arrays) if arrays else np.zeros(0, np.int64))
    return pa.ListArray.from_arrays(pa.array(offsets), values.cast(value_type))
