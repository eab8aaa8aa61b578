"""How much of a training batch is padding, on real shards, at each sequence length.

    python -m bench.padding --shards out/demo/shards              # every seqN in the manifest
    python -m bench.padding --shards DIR --batch 256 --batches 200 --bucket-windows 0,8,32

For each `seqN` output of the manifest, the train split is read through the trainer's own
loader (trainer.data: shuffled, collated into batches of --batch) and the padded token
positions are counted two ways: as the loader pads (each batch to its longest sequence,
rounded up to a multiple of 8) and as `--compile` pads (every batch to N, one graph; with
length bucketing to the narrowest quarter of N that holds it, four graphs). Also the
prediction slots: padded to the batch's most predictions (eager) or to the manifest's
max_predictions_per_seq rounded up to 8 (compiled). Each --bucket-windows value is a row
side by side (0 = the loader without length bucketing). Prints the fractions (of positions
the model computes that hold no token) and the sequence-length quartiles. Not a test.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.measure import DEFAULT_WORKDIR, argument_parser, print_table, write_results


def measure(shards: str, length: int, batch: int, batches: int, window: int) -> dict[str, Any]:
    from schemas.batch import IGNORE_INDEX, BatchField
    from trainer.collate import FixedShape
    from trainer.data import DataPosition, LoaderConfig, PretrainingLoader, open_source

    source = open_source(shards, "train", length)
    max_predictions = source.output.max_predictions_per_seq
    fixed = FixedShape.of(length, max_predictions, buckets=4 if window else 1)
    loader = PretrainingLoader(source, LoaderConfig(batch, seed=0, bucket_window=window))
    real = eager = sequences = predictions = eager_slots = compiled = 0
    lengths: list[int] = []
    for number, tensors in enumerate(loader.epoch(DataPosition())):
        if number >= batches:
            break
        mask = tensors[BatchField.ATTENTION_MASK]
        rows = mask.sum(dim=1)
        lengths += rows.tolist()
        real += int(rows.sum())
        eager += mask.numel()
        compiled += mask.shape[0] * fixed.width_for(mask.shape[1])
        sequences += mask.shape[0]
        labels = tensors[BatchField.MASKED_LABELS]
        predictions += int((labels != IGNORE_INDEX).sum())
        eager_slots += labels.numel()
    quartiles = statistics.quantiles(lengths, n=4)
    return {
        "length": length,
        "bucket_window": window,
        "batches": min(batches, number + 1),
        "sequences": sequences,
        "padding_eager": 1 - real / eager,
        "padding_compiled": 1 - real / compiled,
        "slot_padding_eager": 1 - predictions / eager_slots,
        "slot_padding_compiled": 1 - predictions / (sequences * fixed.slots),
        "length_quartiles": quartiles,
        "full_length_share": sum(n == length for n in lengths) / len(lengths),
    }


def main() -> None:
    parser = argument_parser("bench.padding", __doc__)
    parser.add_argument("--shards", required=True, help="a shards directory or its manifest")
    parser.add_argument("--batch", type=int, default=64, help="sequences per batch")
    parser.add_argument("--batches", type=int, default=100, help="batches read per length")
    parser.add_argument(
        "--bucket-windows", default="0,16", help="comma-separated --bucket-window values (0 = off)"
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args()
    from pipelines.io import storage
    from schemas.checks import MAX_RECORD_BYTES
    from schemas.shards import ShardsManifest

    location = storage.locate(args.shards)
    assert location.manifest_url is not None, f"{args.shards}: no shards manifest"
    manifest = ShardsManifest.from_json(storage.read_text(location.manifest_url, MAX_RECORD_BYTES))
    lengths = sorted(output.max_seq_length for output in manifest.outputs.values())
    windows = [int(w) for w in args.bucket_windows.split(",")]
    results = [
        measure(args.shards, length, args.batch, args.batches, window)
        for length in lengths
        for window in windows
    ]
    rows = [
        [
            f"seq{r['length']}",
            str(r["bucket_window"] or "off"),
            f"{r['sequences']:,}",
            f"{r['padding_eager']:.1%}",
            f"{r['padding_compiled']:.1%}",
            f"{r['slot_padding_eager']:.1%}",
            f"{r['slot_padding_compiled']:.1%}",
            "/".join(f"{q:.0f}" for q in r["length_quartiles"]),
            f"{r['full_length_share']:.1%}",
        ]
        for r in results
    ]
    print_table(
        [
            "length",
            "bucketing",
            "sequences",
            "padding (eager)",
            "padding (--compile)",
            "slots (eager)",
            "slots (--compile)",
            "length quartiles",
            "full length",
        ],
        rows,
    )
    write_results(args.workdir / "results" / "padding.json", {"runs": results})


if __name__ == "__main__":
    main()
