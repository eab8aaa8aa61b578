"""Full-sentence shards without masks against pair shards, on the demo corpus: bytes on disk,
their ratio to the token payload, and padding.

    python -m bench.packing                              # the sample, built in --workdir
    python -m bench.packing --documents WIKI BOOKS --vocab VOCAB --lengths 128,512

Two runs of `bertkit examples` on the same documents and vocabulary, at each --lengths value,
5 % of documents held out (as the demo):

    pairs   Google's sentence pairs, static masks, --dupe-factor 10 (Google's default): the
            2018 recipe stores ten masked copies of the corpus
    full    --sequences full-sentences --masking none --dupe-factor 1: RoBERTa's packing,
            one copy, the trainer draws masks every epoch

For each run and length: sequences, bytes on disk (the seqN tree: shards and block tables;
the manifest is counted in the run's total), their ratio to the token payload, 2 bytes a
token (4 past 65,536 ids) for every token the sequences hold, [CLS] and [SEP] included, and
the other bytes per sequence (a sample's header, length, document ids and predictions, its
share of tar headers and block tables). For full
sentences also the padding share a batch padded to the length has: 1 - tokens / (sequences
× length), over both splits and over the train split alone. Targets: full-sentence bytes on
disk ≤ 1.15× the payload, padding < 1 % at 128 and 512. Without --documents, the sample's
documents and an 8,000-token vocabulary (the demo's) are built once in --workdir.
Writes WORKDIR/results/packing.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.measure import (
    DEFAULT_WORKDIR,
    REPO_ROOT,
    argument_parser,
    print_table,
    verdict_word,
    write_results,
)

PAYLOAD_TARGET = 1.15  # full-sentence bytes on disk per byte of token ids, at most
PADDING_TARGET = 0.01  # share of padded positions at the sequence length, under
PAIR_DUPE_FACTOR = 10
HELDOUT_FRACTION = "0.05"
VOCAB_FLAGS = ("--vocab-size", "8000")  # the demo's: the sample is too small for 30,522
RUNS = {
    "pairs": ("--dupe-factor", str(PAIR_DUPE_FACTOR)),
    "full": ("--sequences", "full-sentences", "--masking", "none", "--dupe-factor", "1"),
}


def padding_share(tokens: int, sequences: int, length: int) -> float:
    """Positions of a batch padded to `length` that hold no token."""
    return 1 - tokens / (sequences * length) if sequences else 0.0


def tree_bytes(directory: Path) -> int:
    """Bytes of every file under `directory`."""
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def output_figures(output: Path) -> dict[str, Any]:
    """A shards directory's figures per length (see the module docstring), from its manifest
    and the files on disk."""
    from schemas.shards import ShardsManifest

    manifest = ShardsManifest.from_json((output / "manifest.json").read_text())
    id_width = manifest.layout["id_width"]
    lengths = {}
    for name, out in manifest.outputs.items():
        splits = out.splits.values()
        sequences = sum(s.samples for s in splits)
        tokens = sum(s.tokens for s in splits)
        on_disk = tree_bytes(output / name)
        train = out.splits["train"]
        lengths[name] = {
            "sequences": sequences,
            "tokens": tokens,
            "bytes": on_disk,
            "payload_bytes": tokens * id_width,
            "bytes_per_payload_byte": on_disk / (tokens * id_width) if tokens else None,
            "overhead_per_sequence": (on_disk - tokens * id_width) / sequences
            if sequences
            else None,
            "padding": padding_share(tokens, sequences, out.max_seq_length),
            "padding_train": padding_share(train.tokens, train.samples, out.max_seq_length),
        }
    return {
        "sequences": manifest.sequences,
        "masking": manifest.masking,
        "dupe_factor": manifest.config["dupe_factor"],
        "bytes": tree_bytes(output),
        "lengths": lengths,
    }


def make_shards(
    documents: list[str], vocab: str, output: Path, lengths: str, kind: str
) -> dict[str, Any]:
    """One run of `bertkit examples` (in this process) and its figures."""
    from pipelines import examples

    flags = ["--max-seq-length", lengths, "--heldout-fraction", HELDOUT_FRACTION, *RUNS[kind]]
    argv = ["--documents", *documents, "--vocab", vocab, "--output", str(output), *flags]
    code = examples.run([*argv, "--overwrite"])
    if code:
        raise SystemExit(f"bertkit examples {' '.join(argv)}: exit {code}")
    return output_figures(output)


def sample_inputs(workdir: Path) -> tuple[list[str], str]:
    """The sample's documents and the demo's 8,000-token vocabulary, built once."""
    from pipelines import books, vocab, wikipedia

    root = workdir / "packing" / "inputs"
    wiki, book, vocab_dir = root / "wikipedia", root / "books", root / "vocab"
    documents = [str(wiki), str(book)]
    if not (vocab_dir / "vocab.txt").exists():
        (dump,) = (REPO_ROOT / "data" / "wikipedia").glob("*.xml.bz2")
        books_input = str(REPO_ROOT / "data" / "books" / "*.txt")
        again = "--overwrite"
        codes = [
            wikipedia.run(["--input", str(dump), "--output", str(wiki), again]),
            books.run(["--input", books_input, "--output", str(book), again]),
            vocab.run(["--documents", *documents, "--output", str(vocab_dir), *VOCAB_FLAGS, again]),
        ]
        if any(codes):
            raise SystemExit(f"building the sample's documents and vocabulary: exits {codes}")
    return documents, str(vocab_dir)


def report(results: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The table's rows: per run and length, and the run's total."""
    rows = []
    pairs_bytes = results["pairs"]["bytes"]
    for kind, figures in results.items():
        for name, f in figures["lengths"].items():
            rows.append(
                [
                    f"{kind} {name}",
                    f"{f['sequences']:,}",
                    f"{f['tokens']:,}",
                    f"{f['bytes']:,}",
                    f"{f['bytes_per_payload_byte']:.3f}×",
                    f"{f['overhead_per_sequence']:.1f}",
                    f"{f['padding']:.2%} / {f['padding_train']:.2%}",
                ]
            )
        rows.append(
            [
                f"{kind} (all, dupe {figures['dupe_factor']})",
                "",
                "",
                f"{figures['bytes']:,}",
                f"{figures['bytes'] / pairs_bytes:.3f} of pairs",
                "",
                "",
            ]
        )
    return rows


def main() -> None:
    parser = argument_parser("bench.packing", __doc__)
    parser.add_argument("--documents", nargs="+", help="documents directories (default: sample)")
    parser.add_argument("--vocab", help="vocabulary directory (with --documents)")
    parser.add_argument("--lengths", default="128,512", help="--max-seq-length of both runs")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args()
    if bool(args.documents) != bool(args.vocab):
        parser.error("--documents and --vocab go together (or neither: the sample)")
    documents, vocab = (
        (args.documents, args.vocab) if args.documents else sample_inputs(args.workdir)
    )
    out = args.workdir / "packing" / "out"
    results = {kind: make_shards(documents, vocab, out / kind, args.lengths, kind) for kind in RUNS}
    print(f"\nFull-sentence shards (no masks) against pairs (dupe {PAIR_DUPE_FACTOR}, masked)")
    print_table(
        [
            "run",
            "sequences",
            "tokens",
            "bytes on disk",
            "bytes / payload",
            "other bytes / sequence",
            "padding all / train",
        ],
        report(results),
        left=(0,),
    )
    full = results["full"]["lengths"].values()
    met_bytes = all(f["bytes_per_payload_byte"] <= PAYLOAD_TARGET for f in full)
    met_padding = all(f["padding"] < PADDING_TARGET for f in full)
    print(
        f"targets: full-sentence bytes on disk ≤ {PAYLOAD_TARGET}× the payload: "
        f"{verdict_word(True, met_bytes)}; padding < {PADDING_TARGET:.0%}: "
        f"{verdict_word(True, met_padding)}"
    )
    write_results(
        args.workdir / "results" / "packing.json",
        {"lengths": args.lengths, "heldout_fraction": HELDOUT_FRACTION, "runs": results},
    )


if __name__ == "__main__":
    main()
