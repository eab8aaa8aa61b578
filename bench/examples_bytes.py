"""Bytes per example, for bench.examples: bertkit's shards against Google's TFRecords.

On the smallest set: bertkit's shard bytes per sample (manifest: shard bytes / samples, tar
headers and padding included) and its payload (the `example.bin` member); Google's TFRecord
bytes per record and per serialized tf.train.Example, measured from its output's record
framing (no TensorFlow needed), and the same layout computed from bertkit's examples with
the protobuf wire format (what Google's padded record would take for bertkit's examples).
And bertkit's shard bytes per sample at every input size: the layout does not grow with the
input. Read from the outputs the examples runs kept (bench.examples_tools). Not a command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.examples_tools import MAX_PREDICTIONS, MAX_SEQ_LENGTH, manifest_splits, output_dir
from bench.measure import fmt, print_table

TFRECORD_FRAMING = 16  # uint64 length, uint32 CRC of the length, data, uint32 CRC of the data


def varint_sizes(values: Any) -> Any:
    """Bytes of each non-negative int as a protobuf varint (7 bits per byte)."""
    import numpy as np

    values = np.asarray(values, dtype=np.uint64)
    sizes = np.ones(values.shape, dtype=np.int64)
    for bits in range(7, 64, 7):
        sizes += values >= (1 << bits)
    return sizes


def varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def google_example_bytes(input_ids: Any, positions: Any, masked_ids: Any) -> int:
    """Serialized size of Google's padded tf.train.Example for one example (wire format).

    Example{features=1: Features{feature=1: map<string, Feature>}}; every map entry is a
    message {key=1, value=2}; Feature{int64_list=3 | float_list=2}, each a packed list.
    Padding zeros take 1 byte each, input_mask and segment_ids 1 byte per value, the 20
    masked_lm_weights 4 bytes each (floats are fixed-width).
    """
    n, k = len(input_ids), len(positions)
    padding, unused = MAX_SEQ_LENGTH - n, MAX_PREDICTIONS - k
    # Packed payload bytes per feature; every field number is < 16, so every tag is 1 byte.
    payloads = {
        "input_ids": int(varint_sizes(input_ids).sum()) + padding,
        "input_mask": MAX_SEQ_LENGTH,
        "segment_ids": MAX_SEQ_LENGTH,
        "masked_lm_positions": int(varint_sizes(positions).sum()) + unused,
        "masked_lm_ids": int(varint_sizes(masked_ids).sum()) + unused,
        "masked_lm_weights": 4 * MAX_PREDICTIONS,
        "next_sentence_labels": 1,
    }
    features = 0
    for key, payload in payloads.items():
        packed = 1 + varint_size(payload) + payload  # Int64List/FloatList: value=1, packed
        feature = 1 + varint_size(packed) + packed  # Feature: the oneof list field
        entry = (1 + varint_size(len(key)) + len(key)) + (1 + varint_size(feature) + feature)
        features += 1 + varint_size(entry) + entry
    return 1 + varint_size(features) + features


def manifest_shards(output: Path) -> list[dict[str, Any]] | None:
    """Every shard of every split of an examples output, from its manifest."""
    splits = manifest_splits(output)
    return None if splits is None else [s for split in splits.values() for s in split["shards"]]


def bertkit_bytes(output: Path) -> dict[str, float] | None:
    """Shard bytes per sample (manifest), mean payload, and Google's layout for the same
    examples (computed), over every shard of an examples output directory."""
    shards = manifest_shards(output)
    if shards is None:
        return None
    from pipelines.io.shards import iter_tar_samples  # lazily: pulls in Beam and numpy
    from schemas.examples import PretrainingExample

    samples = sum(shard["samples"] for shard in shards)
    payload = google = 0
    for shard in shards:
        with (output / shard["path"]).open("rb") as stream:
            for key, data in iter_tar_samples(stream, shard["path"]):
                example = PretrainingExample.decode(data, key)
                payload += len(data)
                google += google_example_bytes(
                    example.input_ids, example.masked_lm_positions, example.masked_lm_ids
                )
    return {
        "samples": samples,
        "shard_bytes_per_sample": sum(shard["bytes"] for shard in shards) / samples,
        "payload_bytes_per_sample": payload / samples,
        "google_layout_bytes_computed": google / samples,
    }


def google_bytes(output: Path) -> dict[str, float] | None:
    """Records, bytes per record and mean serialized tf.train.Example of a TFRecord file,
    read from its framing (no TensorFlow needed)."""
    path = output / "examples.tfrecord"
    if not path.exists():
        return None
    records = example_bytes = 0
    with path.open("rb") as stream:
        while header := stream.read(12):
            length = int.from_bytes(header[:8], "little")
            stream.seek(length + 4, 1)
            records += 1
            example_bytes += length
    if not records:
        return None
    return {
        "records": records,
        "record_bytes": path.stat().st_size / records,
        "example_bytes": example_bytes / records,
    }


def storage_per_size(workdir: Path, sizes: list[float]) -> dict[str, float | None]:
    """Shard bytes per sample of every size's kept output: the layout does not grow with it."""
    result: dict[str, float | None] = {}
    for size in sizes:
        shards = manifest_shards(output_dir(workdir, "bertkit", size))
        if shards is None:
            result[f"{size:g}"] = None
            continue
        samples = sum(shard["samples"] for shard in shards)
        result[f"{size:g}"] = sum(s["bytes"] for s in shards) / samples if samples else None
    return result


def print_bytes_table(
    ours: dict[str, float] | None,
    google: dict[str, float] | None,
    per_size: dict[str, float | None],
    size_mb: float,
) -> None:
    print(f"\nBytes per example at seq {MAX_SEQ_LENGTH} ({size_mb:g} MB input)")
    rows = []
    if ours:
        rows += [
            [
                "bertkit shard (tar)",
                f"{ours['shard_bytes_per_sample']:,.0f}",
                "shard bytes / samples: a tar header and padding per block of 512 samples",
            ],
            [
                "bertkit payload",
                f"{ours['payload_bytes_per_sample']:,.0f}",
                "a packed sample: ids uint16, no padding, provenance ids",
            ],
            [
                "Google layout, computed",
                f"{ours['google_layout_bytes_computed']:,.0f}",
                "bertkit's examples as Google's padded tf.train.Example (wire format)",
            ],
        ]
    if google:
        rows += [
            [
                "Google TFRecord record",
                f"{google['record_bytes']:,.0f}",
                f"measured: file bytes / {google['records']:,} records",
            ],
            [
                "Google tf.train.Example",
                f"{google['example_bytes']:,.0f}",
                f"measured: record minus its {TFRECORD_FRAMING} B framing",
            ],
        ]
    print_table(["what", "bytes", "how"], rows, left=(0, 2))
    sizes = ", ".join(f"{size} MB: {fmt(value, ',.0f')}" for size, value in per_size.items())
    print(f"bertkit shard bytes per sample by input size: {sizes}")
    if ours and google:
        record = google["record_bytes"]
        print(
            f"Google record / bertkit: {record / ours['shard_bytes_per_sample']:.2f}× the shard "
            f"bytes, {record / ours['payload_bytes_per_sample']:.2f}× the payload"
        )
