"""Turn a trainer checkpoint into an HF `BertForPreTraining` directory: `bertkit export-hf`.

    bertkit export-hf out/run/checkpoints --output out/run/hf      # the `latest` checkpoint
    bertkit export-hf out/run/checkpoints/step-00010000.pt --output out/hf-10k
    # = python -m trainer.export …; then, in Python:
    #   transformers.BertForPreTraining.from_pretrained("out/hf-10k")
    #   transformers.AutoTokenizer.from_pretrained("out/hf-10k")

CHECKPOINT is a checkpoint file (schemas/checkpoint.py) or a checkpoint directory, whose
`latest` file names the newest complete one. --output (a local directory) gets:
    model.safetensors        the weights under HF's names (trainer.model.hf_state_dict)
    vocab.txt, tokenizer.json   copied from the vocabulary the shards were made with
    tokenizer_config.json, special_tokens_map.json   BertTokenizer settings
    config.json              HF's BertConfig, written last: a directory cut short by a
                             crash has none, so from_pretrained refuses it

The vocabulary is the one the checkpoint records (the shards manifest's `vocab.path`, which
may be relative to where `bertkit examples` ran), or --vocab DIR when that has moved. Its
vocab.txt must have the sha256 the checkpoint records: a model is only meaningful with the
ids it was trained on, so a different vocabulary is refused, never exported.

The export loads the weights into trainer.model.BertForPreTraining first (strict), so a
checkpoint of another model shape fails here, not in from_pretrained. HF's model then gives
the logits of `BertForPreTraining.prediction_scores` (tests/test_export.py checks it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors import safe_open
from safetensors.torch import save_file

from pipelines.io import storage
from pipelines.io.vocabulary import VocabError, Vocabulary, load_vocab
from schemas.checkpoint import LATEST_FILE, CheckpointKey
from schemas.checks import MAX_VOCAB_FILE_BYTES
from schemas.vocab import (
    CLS_TOKEN,
    MASK_TOKEN,
    PAD_TOKEN,
    SEP_TOKEN,
    TOKENIZER_FILE,
    UNK_TOKEN,
    VOCAB_FILE,
)
from trainer.checkpoint import (
    CheckpointError,
    check_run_location,
    load_checkpoint,
    model_from_checkpoint,
    resolve_checkpoint,
)
from trainer.model import BertConfig, hf_state_dict
from trainer.remote_run import fetch_checkpoint

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
# The names an export writes, and their temporary names (`_write_atomically`).
_EXPORT_NAME = re.compile(
    r"\.?(?:"
    + "|".join(
        re.escape(name)
        for name in (CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE, TOKENIZER_FILE,
                     TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
    )
    + r")(?:\.tmp-[0-9a-f]{32})?"
)  # fmt: skip
# What HF's BertTokenizer calls each special token.
SPECIAL_TOKENS_MAP = {
    "unk_token": UNK_TOKEN,
    "sep_token": SEP_TOKEN,
    "pad_token": PAD_TOKEN,
    "cls_token": CLS_TOKEN,
    "mask_token": MASK_TOKEN,
}


class ExportError(CheckpointError):
    """Bad checkpoint, vocabulary or output directory; the message says what to do."""


# --- Reading the checkpoint -----------------------------------------------------------------


# --- The vocabulary -------------------------------------------------------------------------


def checked_vocab(record: dict[str, Any], vocab_dir: str | None) -> tuple[Vocabulary, str]:
    """Load the checkpoint's vocabulary (or `vocab_dir`) and check its sha256; return it and
    the directory it came from."""
    expected = record.get("sha256")
    directory = vocab_dir if vocab_dir is not None else record.get("path")
    if not directory:
        raise ExportError(
            "the checkpoint names no vocabulary directory: pass --vocab DIR with the "
            f"vocabulary the shards were made with (vocab.txt sha256 {expected})"
        )
    try:
        vocab = load_vocab(directory)
    except (VocabError, OSError) as err:
        hint = (
            "pass the directory the shards were made with"
            if vocab_dir is not None
            else "if it moved, pass --vocab DIR"
        )
        raise ExportError(f"cannot use the vocabulary at {directory}: {err}; {hint}") from err
    if vocab.sha256 != expected:
        raise ExportError(
            f"the vocabulary at {directory} has vocab.txt sha256 {vocab.sha256}, but the "
            f"checkpoint was trained on one with sha256 {expected}: pass --vocab DIR with the "
            "vocabulary the shards were made with"
        )
    return vocab, directory


# --- The HF files ---------------------------------------------------------------------------


def hf_config(config: BertConfig) -> dict[str, Any]:
    """config.json for HF's BertConfig."""
    return {
        "architectures": ["BertForPreTraining"],
        "model_type": "bert",
        "hidden_act": "gelu",  # exact erf GELU, as trainer.model
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "layer_norm_eps": config.layer_norm_eps,
        "initializer_range": config.initializer_range,
        "pad_token_id": config.pad_token_id,
    }


def tokenizer_config(cased: bool, model_max_length: int) -> dict[str, Any]:
    """tokenizer_config.json: a BertTokenizer with the vocabulary's casing."""
    return {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": not cased,
        # None: strip accents exactly when lower-casing, as Google's uncased BERT.
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "model_max_length": model_max_length,
        **SPECIAL_TOKENS_MAP,
    }


def _json_bytes(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """`write` a temporary file next to `path`, then rename it: never a partial file."""
    temporary = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def check_output(output_dir: Path, overwrite: bool) -> None:
    """Refuse, before any writing: a file as --output; a non-empty directory without
    `overwrite`; and, even with it, a directory holding anything an export does not write
    (a vocabulary directory's vocab.json, a model of another tool): nothing is replaced there.
    """
    if output_dir.exists() and not output_dir.is_dir():
        raise ExportError(f"{output_dir} is a file: pass a directory as --output")
    existing = sorted(p.name for p in output_dir.iterdir()) if output_dir.is_dir() else []
    foreign = [name for name in existing if not _EXPORT_NAME.fullmatch(name)]
    if foreign:
        raise ExportError(
            f"{output_dir} holds {foreign[0]}, which `bertkit export-hf` does not write: "
            "nothing was replaced. Choose a new or empty --output"
        )
    if existing and not overwrite:
        raise ExportError(
            f"{output_dir} is not empty (e.g. {existing[0]}); choose a new --output or "
            "pass --overwrite to replace the export's files in it"
        )


def export_hf(
    checkpoint_path: str | Path,
    output_dir: str | Path,
    vocab_dir: str | None = None,
    overwrite: bool = False,
) -> list[str]:
    """Write the HF directory for a checkpoint (file or directory); return the files written,
    in order. Raises ExportError on a bad checkpoint, vocabulary or output directory."""
    check_run_location("--checkpoint", checkpoint_path, remote_ok=True)
    check_run_location("--output", output_dir, remote_ok=False)
    if storage.is_remote(str(checkpoint_path)):
        check_output(Path(output_dir), overwrite)  # before the download, not after it
        local, folder = fetch_checkpoint(str(checkpoint_path))
        try:
            return export_hf(local, output_dir, vocab_dir, overwrite)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    output_dir = Path(output_dir)
    check_output(output_dir, overwrite)
    path = resolve_checkpoint(checkpoint_path)
    run_checkpoints = (path.parent / LATEST_FILE).is_file()  # a trainer's, not any folder
    if run_checkpoints and output_dir.resolve().is_relative_to(path.parent.resolve()):
        raise ExportError(
            f"--output {output_dir} is inside the checkpoint directory {path.parent}: "
            "write the export beside the run, not into it"
        )
    checkpoint = load_checkpoint(path)
    model = model_from_checkpoint(checkpoint, path)
    config = model.config
    vocab, directory = checked_vocab(checkpoint[CheckpointKey.VOCAB], vocab_dir)
    if vocab.size > config.vocab_size:
        raise ExportError(
            f"the vocabulary at {directory} has {vocab.size} tokens but the model only "
            f"{config.vocab_size} embeddings: the checkpoint is damaged"
        )
    # The bytes copied are the bytes checked (load_vocab hashed its own read of them).
    files = {
        name: storage.read_bytes(storage.join(directory, name), MAX_VOCAB_FILE_BYTES)
        for name in (VOCAB_FILE, TOKENIZER_FILE)
    }
    if (
        hashlib.sha256(files[VOCAB_FILE]).hexdigest() != vocab.sha256
        or hashlib.sha256(files[TOKENIZER_FILE]).hexdigest() != vocab.metadata.tokenizer_sha256
    ):
        raise ExportError(f"the vocabulary at {directory} changed during the export: rerun it")
    files[TOKENIZER_CONFIG_FILE] = _json_bytes(
        tokenizer_config(vocab.cased, config.max_position_embeddings)
    )
    files[SPECIAL_TOKENS_MAP_FILE] = _json_bytes(SPECIAL_TOKENS_MAP)

    output_dir.mkdir(parents=True, exist_ok=True)
    # An earlier export's config.json goes first: one cut short then leaves a directory
    # from_pretrained refuses, never new weights under an old config.
    (output_dir / CONFIG_FILE).unlink(missing_ok=True)
    written = []
    weights = hf_state_dict(model)
    _write_atomically(
        output_dir / WEIGHTS_FILE, lambda p: save_file(weights, p, metadata={"format": "pt"})
    )
    written.append(str(output_dir / WEIGHTS_FILE))
    # config.json last: from_pretrained needs it, so an interrupted export is not loadable.
    files[CONFIG_FILE] = _json_bytes(hf_config(config))
    for name, data in files.items():
        _write_atomically(output_dir / name, lambda p, data=data: p.write_bytes(data))
        written.append(str(output_dir / name))
    return written


# --- The command ----------------------------------------------------------------------------


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bertkit export-hf",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # fmt: off
    parser.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="a checkpoint file, or a checkpoint directory (its `latest`)")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="the HF model directory to write (local)")
    parser.add_argument("--vocab", metavar="DIR",
                        help="the vocabulary directory, when it moved since the shards were made")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the files of an earlier export in --output")
    # fmt: on
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    """Export and report; return the exit code. Raises ExportError on bad input."""
    args = parse_arguments(argv)
    written = export_hf(args.checkpoint, args.output, args.vocab, args.overwrite)
    for path in written:
        print(f"{path}  {os.path.getsize(path):,} bytes")
    # Read back what was written: the summary describes the files, not the intent.
    output = Path(args.output)
    config = json.loads((output / CONFIG_FILE).read_text(encoding="utf-8"))
    with safe_open(output / WEIGHTS_FILE, framework="pt") as weights:
        names = weights.keys()
        parameters = sum(math.prod(weights.get_slice(name).get_shape()) for name in names)
    print(
        f"{output}: HF BertForPreTraining, {config['num_hidden_layers']} layers × "
        f"{config['hidden_size']}, {parameters:,} parameters, {config['vocab_size']} token ids"
    )
    return 0


def main(argv: list[str] | None = None) -> None:
    try:
        code = run(argv)
    except (CheckpointError, OSError) as err:  # ExportError is a CheckpointError
        print(f"bertkit export-hf: error: {err}", file=sys.stderr)
        code = 2
    sys.exit(code)


if __name__ == "__main__":
    main()
