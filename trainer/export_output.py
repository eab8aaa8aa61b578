"""The files `bertkit export-hf` writes, and the checks of its --output before any writing:
an earlier export (its weights carry WEIGHTS_METADATA's mark) may be replaced with
--overwrite; anything else (a model of another tool, a vocabulary) never is."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pipelines.io import objects, storage
from schemas.vocab import TOKENIZER_FILE, VOCAB_FILE
from trainer.run.checkpoints import CheckpointError

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
# Every export's model.safetensors header: how --overwrite knows an earlier export from a
# model of another tool (transformers' has {"format": "pt"} alone).
WEIGHTS_METADATA = {"format": "pt", "bertkit": "export-hf"}
# config.json's fields in an export of a new model before that mark (transformers adds more).
_UNMARKED_EXPORT_CONFIG = """architectures attention_probs_dropout_prob hidden_act
    hidden_dropout_prob hidden_size initializer_range intermediate_size layer_norm_eps
    max_position_embeddings model_type num_attention_heads num_hidden_layers pad_token_id
    position_embedding_type tie_word_embeddings type_vocab_size vocab_size"""
# The names an export writes, and their temporary names (export.py's `_write_atomically`): an upload
# to object storage has none (an object appears whole).
_EXPORT_FILES = (CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE)
_EXPORT_FILES += (SPECIAL_TOKENS_MAP_FILE,)
EXPORT_NAME = re.compile(
    r"\.?(?:" + "|".join(re.escape(name) for name in _EXPORT_FILES) + r")(?:\.tmp-[0-9a-f]{32})?"
)
# A safetensors header is a few hundred bytes a tensor: far below this.
_MAX_SAFETENSORS_HEADER = 100 * 2**20


class ExportError(CheckpointError):
    """Bad checkpoint, vocabulary or output directory; the message says what to do."""


def check_output(output_dir: Path, overwrite: bool) -> None:
    """Refuse, before any writing: a file as --output; a non-empty directory without
    `overwrite`; and, even with it, a directory holding anything an export does not write
    (a vocabulary directory's vocab.json) or a model no export wrote: nothing is replaced.
    """
    if output_dir.exists() and not output_dir.is_dir():
        raise ExportError(f"{output_dir} is a file: pass a directory as --output")
    existing = sorted(p.name for p in output_dir.iterdir()) if output_dir.is_dir() else []
    _check_existing(str(output_dir), existing, EXPORT_NAME.fullmatch, overwrite)


def _check_existing(
    location: str, existing: list[str], is_export_file: Callable[[str], object], overwrite: bool
) -> None:
    where = storage.redact(location) if storage.is_url(location) else location
    foreign = [name for name in existing if not is_export_file(name)]
    if foreign:
        raise ExportError(
            f"{where} holds {foreign[0]}, which `bertkit export-hf` does not write: "
            "nothing was replaced. Choose a new or empty --output"
        )
    names = [name for name in existing if name in _EXPORT_FILES]  # not temporary names
    if names and not _is_earlier_export(location, names):
        shown = next((n for n in (WEIGHTS_FILE, CONFIG_FILE) if n in names), names[0])
        raise ExportError(
            f"{where} holds {shown}, which no `bertkit export-hf` marked as its own (a model "
            "or tokenizer saved by another tool, or the export of a released model's run by "
            "a bertkit before the mark): nothing was replaced. Choose a new or empty --output"
        )
    if existing and not overwrite:
        raise ExportError(
            f"{where} is not empty (e.g. {existing[0]}); choose a new --output or "
            "pass --overwrite to replace the export's files in it"
        )


def check_remote_output(url: str, checkpoint: str, overwrite: bool) -> list[str]:
    """check_output for an s3:// or gs:// prefix, from its listing (every name under it, so a
    "folder" of another tool is refused too); also refuses a prefix inside the checkpoint's
    folder on the same storage. Returns the export files already there."""
    where = storage.redact(url)
    if storage.is_remote(checkpoint):
        folder = checkpoint.rstrip("/")
        if folder.endswith(".pt"):
            folder = folder.rsplit("/", 1)[0]
        if f"{url}/".startswith(f"{folder}/"):
            raise ExportError(
                f"--output {where} is inside the checkpoint directory "
                f"{storage.redact(folder)}: write the export beside the run, not into it"
            )
    problem = objects.object_problem(url, "--output")
    if problem:
        raise ExportError(problem)
    # A name ending in / is a zero-byte folder marker (consoles make them), not a file.
    existing = [n for n in objects.list_names(url) if n and not n.endswith("/")]
    _check_existing(url, existing, _EXPORT_FILES.__contains__, overwrite)
    return existing


def _is_earlier_export(directory: str, names: list[str]) -> bool:
    """Whether the export files `names` in `directory` (a path or a prefix) are an export's:
    its weights have the mark, or (before the mark) config.json has export-hf's fields alone."""
    try:
        if WEIGHTS_FILE in names:
            header = safetensors_header(storage.join(directory, WEIGHTS_FILE))
            metadata = header.get("__metadata__")
            if isinstance(metadata, dict) and metadata.get("bertkit") == "export-hf":
                return True
        if CONFIG_FILE in names:
            config = json.loads(storage.read_bytes(storage.join(directory, CONFIG_FILE), 2**20))
            return isinstance(config, dict) and sorted(config) == _UNMARKED_EXPORT_CONFIG.split()
    except (OSError, ValueError, AttributeError, ExportError):
        pass  # unreadable, or not JSON objects: not known as an export's
    return False


def safetensors_header(weights: str) -> dict[str, Any]:
    """A safetensors file's header (a u64 length, then JSON: name → dtype, shape, offsets;
    "__metadata__"), read alone: no download of the weights."""
    with storage.open_binary(weights) as source:
        (length,) = struct.unpack("<Q", _read_exactly(source, 8, weights))
        if length > _MAX_SAFETENSORS_HEADER:
            raise ExportError(f"{weights}: not a safetensors file (header of {length:,} bytes)")
        return json.loads(_read_exactly(source, length, weights))


def _read_exactly(source: BinaryIO, size: int, where: str) -> bytes:
    data = storage.read_exactly(source, size)
    if len(data) < size:
        raise ExportError(f"{where}: cut short ({len(data)} of {size} bytes)")
    return data
