"""Turn a trainer checkpoint into an HF model directory: `bertkit export-hf`.

    bertkit export-hf out/run --output out/run-hf                  # the run's `latest` checkpoint
    bertkit export-hf out/run/checkpoints/step-00010000.pt --output out/hf-10k
    bertkit export-hf s3://bucket/runs/r1/checkpoints --output s3://bucket/models/r1
    # = python -m trainer.export …; then, in Python:
    #   transformers.BertForPreTraining.from_pretrained("out/hf-10k")   # --objective mlm+nsp
    #   transformers.BertForMaskedLM.from_pretrained("out/hf-10k")      # --objective mlm
    #   transformers.AutoTokenizer.from_pretrained("out/hf-10k")

The HF class is the one whose heads the checkpoint's model has (its model_config's
`objective`): `BertForPreTraining` for mlm+nsp (pooler and NSP head included), and
`BertForMaskedLM` for mlm (neither: HF's `BertModel(add_pooling_layer=False)` and
`cls.predictions`), each loading with no missing or unexpected weight. Either class's
config.json names it in `architectures`, so AutoModel classes pick it too.

CHECKPOINT is a checkpoint file, a checkpoint directory, whose `latest` file names the
newest complete one, or a run directory (`bertkit train --output`: its checkpoints/), local
or on s3://, gs://. --output (a local directory, or an s3:// or gs:// prefix) gets:
    model.safetensors        the weights under HF's names
    vocab.txt, tokenizer.json   copied from the vocabulary the shards were made with
    tokenizer_config.json, special_tokens_map.json   BertTokenizer settings
    config.json              HF's BertConfig, written last: a directory cut short by a
                             crash has none, so from_pretrained refuses it

A run started from a released model (--init-checkpoint DIR, a transformers BERT) exports
that model's own tokenizer files, copied byte for byte from DIR (checked against the sha256s
its checkpoints record), and a config.json with every field of DIR's, so from_pretrained
works on the export as on the original. A released vocabulary or model with tokenizer.json
and no vocab.txt (as transformers 5 saves one) also gets the vocab.txt its tokens make, the
one whose sha256 the checkpoint records, for Google's code and transformers 4's tokenizer.

--overwrite replaces an earlier export and leaves no file of it. An export is known by the
mark in its model.safetensors header (or, from a bertkit before the mark, a config.json with
export-hf's fields alone); anything else (a model saved by another tool, a vocabulary) is
refused even with --overwrite, as is the released model the run started from. An --output
on object storage is checked the same way, written to a local staging directory, then
uploaded in the same order, config.json last (after the earlier export's is deleted).

The vocabulary is the one the checkpoint records (its `vocab.path`, relative to the
checkpoint's directory, so a run's tree copied or moved with its vocabulary keeps working;
see docs/formats.md), or --vocab DIR when it has moved apart. Its vocab.txt must have the
sha256 the checkpoint records: a model is only meaningful with the ids it was trained on, so
a different vocabulary is refused, never exported.

Every file is written with the user's umask (0644 under the usual 022), as `cp` would. The
weights load into bertkit's own model first (strict): a checkpoint of another shape fails
here, not in from_pretrained; HF's model then gives the same logits as bertkit's.

Read on: docs/training.md#export-for-transformers, docs/formats.md#an-export.
"""

# For code readers: `bertkit export-hf`'s command line, apart from trainer/export.py (which
# imports torch) so that `bertkit export-hf --help` works in an install without the train
# extra (bertkit/cli.py).

from __future__ import annotations

import argparse

from pipelines.io import extras


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bertkit export-hf",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="a checkpoint file, a checkpoint directory (its `latest`), or a run directory "
        "(its checkpoints/latest)",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="the HF model directory to write: local, or an s3:// or gs:// prefix",
    )
    parser.add_argument(
        "--vocab",
        metavar="DIR",
        help="the vocabulary directory, when it moved since the shards were made",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the files of an earlier export in --output",
    )
    args = parser.parse_args(argv)
    # An empty path is the working directory to pathlib: an export would land there.
    for name, value in (
        ("CHECKPOINT", args.checkpoint),
        ("--output", args.output),
        ("--vocab", args.vocab),
    ):
        if value is not None and not value.strip():
            parser.exit(2, f"{parser.prog}: error: {name} is empty: give it a value\n")
    # An s3:// or gs:// location whose client is not installed: one line, before any work.
    problem = extras.urls_problem(
        [("", args.checkpoint), ("--output", args.output), ("--vocab", args.vocab)]
    )
    if problem:
        parser.exit(2, f"{parser.prog}: error: {problem}\n")
    return args
