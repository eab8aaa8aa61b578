"""`bertkit export-hf`: a trainer checkpoint → an HF model directory.

What the command does and its flags are `bertkit export-hf --help`, whose text is
trainer/export_flags.py's (it loads without torch, so the help works in any install).
"""

# For code readers: the weights are renamed by trainer/hf_names.py (as a released model's are
# on the way in, trainer/released.py), the checkpoint's layout is schemas/checkpoint.py's, an
# object-storage --output is uploaded by pipelines/io/objects.py; tests/test_export.py (and
# tests/test_objective.py for mlm) check the logits equal `prediction_scores`.

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.torch import save

from pipelines.command.interruption import StageStop, exit_code
from pipelines.io import objects, storage
from pipelines.io.places import same_place_key
from pipelines.io.recorded_paths import resolve_path
from pipelines.io.released_vocab import tokenizer_json_tokens
from pipelines.io.vocabulary import VocabError, Vocabulary, load_vocab, vocab_txt_bytes
from schemas.checkpoint import LATEST_FILE, CheckpointKey
from schemas.checks import MAX_VOCAB_FILE_BYTES
from schemas.vocab import (
    CASED_FROM_TOKENIZER_CONFIG,
    CLS_TOKEN,
    MASK_TOKEN,
    PAD_TOKEN,
    SEP_TOKEN,
    TOKENIZER_FILE,
    UNK_TOKEN,
    VOCAB_FILE,
)
from trainer.export_flags import parse_arguments
from trainer.export_output import (
    CONFIG_FILE,
    EXPORT_NAME,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_CONFIG_FILE,
    WEIGHTS_FILE,
    WEIGHTS_METADATA,
    ExportError,
    check_output,
    check_remote_output,
    safetensors_header,
)
from trainer.model import BertConfig, hf_state_dict
from trainer.released import START_RELEASED, TOKENIZER_FILES
from trainer.run.checkpoints import (
    CheckpointError,
    load_checkpoint,
    model_from_checkpoint,
    resolve_checkpoint,
)
from trainer.run.location import check_run_location
from trainer.run.remote import fetch_checkpoint

# What HF's BertTokenizer calls each special token.
SPECIAL_TOKENS_MAP = {
    "unk_token": UNK_TOKEN,
    "sep_token": SEP_TOKEN,
    "pad_token": PAD_TOKEN,
    "cls_token": CLS_TOKEN,
    "mask_token": MASK_TOKEN,
}


# --- The vocabulary -------------------------------------------------------------------------


def checked_vocab(
    record: dict[str, Any], vocab_dir: str | None, checkpoint_dir: str
) -> tuple[Vocabulary, str]:
    """Load the checkpoint's vocabulary (or `vocab_dir`) and check its sha256; return it and
    the directory it came from. The recorded path is relative to `checkpoint_dir`, the
    checkpoint's own directory (pipelines/io/recorded_paths.py)."""
    expected = record.get("sha256")
    recorded = record.get("path")
    if vocab_dir is not None:
        directory: str | None = vocab_dir
    elif recorded:
        directory = resolve_path(str(recorded), checkpoint_dir, VOCAB_FILE)
    else:
        directory = None
    if not directory:
        raise ExportError(
            "the checkpoint names no vocabulary directory: pass --vocab DIR with the "
            f"vocabulary the shards were made with (vocab.txt sha256 {expected})"
        )
    try:
        # The casing it was trained with: a released vocabulary may not say its own.
        vocab = load_vocab(directory, cased=record.get("cased"), cased_flag="the checkpoint")
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


# The HF class of each objective's model (trainer.model.BertConfig.objective).
HF_ARCHITECTURES = {"mlm+nsp": "BertForPreTraining", "mlm": "BertForMaskedLM"}


def hf_config(config: BertConfig, original: dict[str, Any] | None = None) -> dict[str, Any]:
    """config.json for HF's BertConfig, naming the HF class of the model's objective; over
    `original`'s fields, the config.json of the released model the run started from. The
    dtype is the file's, float32 (an fp16 original's "float16" would load it half). The
    dropout rates are the run's, but for a released model's run: its own (transformers'
    default where it has none), not the --dropout flags it trained with."""
    rates = {
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
    }
    dtype = {"dtype": "float32"}  # transformers 5's name; 4's, where the original has it
    if original is not None:
        rates = {}  # its own, in `original` (transformers' default where it has none)
        dtype |= {"torch_dtype": "float32"} if "torch_dtype" in original else {}
    return {
        **(original or {}),
        **dtype,
        **rates,
        "architectures": [HF_ARCHITECTURES[config.objective]],
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
        storage.give_default_mode(temporary)  # the umask's mode, as `cp` would give
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _save_weights(weights: dict[str, Any], path: Path) -> None:
    """safetensors' bytes, written by us: its save_file writes a `.tmpXXXXXX` of its own
    beside `path`, which a kill mid-write left behind under a name no export owns (every
    rerun, --overwrite too, then refused the directory). WEIGHTS_METADATA always in its own
    order (safetensors writes a dict's keys in any): an export's bytes are the same each
    time. It is the header's first field."""
    data = save(weights, metadata=WEIGHTS_METADATA)  # the file's bytes, held once
    want = json.dumps(WEIGHTS_METADATA, separators=(",", ":")).encode()
    swapped = json.dumps(dict(reversed(WEIGHTS_METADATA.items())), separators=(",", ":"))
    start = 8 + len(b'{"__metadata__":')  # after the header's u64 length
    end = start + len(want)
    with open(path, "wb") as file, memoryview(data) as view:  # slices, not a second copy
        file.write(view[:start])
        file.write(want if view[start:end] == swapped.encode() else view[start:end])
        file.write(view[end:])


def _check_not_start(record: dict[str, Any], checkpoint_dir: str, output: str) -> None:
    """Refuse the released model's directory the run started from as --output (by place)."""
    start = resolve_path(str(record.get("path")), checkpoint_dir, str(record.get("config_file")))
    if same_place_key(start) == same_place_key(output):
        raise ExportError(
            f"--output {storage.redact(output)} is the released model this run started from "
            "(--init-checkpoint): the export would replace its files. Choose another --output"
        )


def _export_to_object_storage(
    checkpoint_path: str, url: str, vocab_dir: str | None, overwrite: bool
) -> list[str]:
    """export_hf to a local staging directory, then upload it in the order it was written
    (config.json last); an earlier export's config.json is deleted first, so an upload cut
    short leaves a prefix from_pretrained refuses, as a local export does, then each file
    of it this export does not write."""
    url = url.rstrip("/")
    objects.split(url)  # only s3:// and gs://
    earlier = check_remote_output(url, checkpoint_path, overwrite)
    staging = Path(tempfile.mkdtemp(prefix="bertkit-export-"))
    try:
        written = export_hf(checkpoint_path, staging / "hf", vocab_dir, destination=url)
        stale = set(earlier) - {Path(path).name for path in written}
        for name in [CONFIG_FILE] * (CONFIG_FILE in earlier) + sorted(stale):
            objects.delete(f"{url}/{name}")
        uploaded = []
        for path in map(Path, written):
            objects.upload(path, f"{url}/{path.name}")
            uploaded.append(f"{url}/{path.name}")
        return uploaded
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export_hf(
    checkpoint_path: str | Path,
    output_dir: str | Path,
    vocab_dir: str | None = None,
    overwrite: bool = False,
    checkpoint_dir: str | None = None,
    destination: str | None = None,
) -> list[str]:
    """Write the HF directory for a checkpoint (file or directory, local or a URL) to a local
    directory or an s3://, gs:// prefix; return the files written (URLs for a prefix), in
    order. Raises ExportError on a bad checkpoint, vocabulary or output directory.

    `checkpoint_dir` is where the checkpoint's recorded vocabulary path is relative to, for
    a checkpoint downloaded first (its URL's directory); by default the file's own.
    `destination` is the --output a staging directory stands for (an s3:// prefix)."""
    check_run_location("--checkpoint", checkpoint_path, remote_ok=True)
    check_run_location("--output", output_dir, remote_ok=True)
    if storage.is_remote(str(output_dir)):
        return _export_to_object_storage(
            str(checkpoint_path), str(output_dir), vocab_dir, overwrite
        )
    if storage.is_remote(str(checkpoint_path)):
        check_output(Path(output_dir), overwrite)  # before the download, not after it
        local, folder, located = fetch_checkpoint(str(checkpoint_path))
        try:
            return export_hf(local, output_dir, vocab_dir, overwrite, located, destination)
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
    located = checkpoint_dir or str(path.parent)
    # A run started from a released model: its own tokenizer files, byte for byte, so
    # from_pretrained on the export works as on the original; the vocabulary's otherwise.
    start = checkpoint.get(CheckpointKey.START)
    released = start if isinstance(start, dict) and start.get("kind") == START_RELEASED else None
    if released:
        _check_not_start(released, located, destination or str(output_dir))
    model = model_from_checkpoint(checkpoint, path)
    config = model.config
    vocab, directory = checked_vocab(checkpoint[CheckpointKey.VOCAB], vocab_dir, located)
    if vocab.size > config.vocab_size:
        raise ExportError(
            f"the vocabulary at {directory} has {vocab.size} tokens but the model only "
            f"{config.vocab_size} embeddings: the checkpoint is damaged"
        )
    files = released_tokenizer_files(released, located, vocab_dir) if released else {}
    if released and _released_vocab_sha256(files) != vocab.sha256:
        raise ExportError(
            f"the released model's vocab.txt is not the vocabulary at {directory} the "
            "checkpoint records: the checkpoint is damaged"
        )
    # The bytes copied are the bytes checked (load_vocab hashed its own read of them). A
    # released vocabulary's directory gives the files it holds, none made up but a vocab.txt
    # it lacks (below; transformers builds tokenizer.json from vocab.txt), its
    # tokenizer_config.json only where that says the casing (else the one written below
    # says the casing the run used).
    expected = {VOCAB_FILE: vocab.sha256, TOKENIZER_FILE: vocab.metadata.tokenizer_sha256}
    names = [VOCAB_FILE, TOKENIZER_FILE]
    if vocab.released:
        names = [n for n in vocab.source_files if n != TOKENIZER_CONFIG_FILE]
        if vocab.cased_from == CASED_FROM_TOKENIZER_CONFIG:
            names.append(TOKENIZER_CONFIG_FILE)
    for name in names:
        if name not in files:
            data = storage.read_bytes(storage.join(directory, name), MAX_VOCAB_FILE_BYTES)
            if name in expected and hashlib.sha256(data).hexdigest() != expected[name]:
                raise ExportError(
                    f"the vocabulary at {directory} changed during the export: rerun it"
                )
            files[name] = data
    # A released directory with tokenizer.json alone (transformers 5 saves no vocab.txt) gets
    # the vocab.txt its tokens make, the file whose sha256 the checkpoint records: Google's
    # code and transformers 4's BertTokenizer read it, and from_pretrained, given both,
    # reads tokenizer.json, so the export's ids are the original's either way.
    files.setdefault(VOCAB_FILE, vocab_txt_bytes(vocab.tokens))
    files.setdefault(
        TOKENIZER_CONFIG_FILE,
        _json_bytes(tokenizer_config(vocab.cased, config.max_position_embeddings)),
    )
    files.setdefault(SPECIAL_TOKENS_MAP_FILE, _json_bytes(SPECIAL_TOKENS_MAP))

    output_dir.mkdir(parents=True, exist_ok=True)
    # An earlier export's config.json first (one cut short is then unloadable, never new
    # weights under an old config), then each file of it this one does not write.
    for old in sorted(output_dir.iterdir(), key=lambda path: path.name != CONFIG_FILE):
        if EXPORT_NAME.fullmatch(old.name) and old.name not in {WEIGHTS_FILE, *files}:
            old.unlink(missing_ok=True)
    written = []
    weights = hf_state_dict(model)
    _write_atomically(output_dir / WEIGHTS_FILE, lambda p: _save_weights(weights, p))
    written.append(str(output_dir / WEIGHTS_FILE))
    # config.json last: from_pretrained needs it, so an interrupted export is not loadable.
    files[CONFIG_FILE] = _json_bytes(hf_config(config, released["config"] if released else None))
    for name, data in files.items():
        _write_atomically(output_dir / name, lambda p, data=data: p.write_bytes(data))
        written.append(str(output_dir / name))
    return written


def released_tokenizer_files(
    record: dict[str, Any], checkpoint_dir: str, vocab_dir: str | None = None
) -> dict[str, bytes]:
    """The tokenizer files of the released model a run started from (its checkpoint's start
    `record`), by name, as the run found them: from the directory it records or, where the
    model moved, from --vocab (`vocab_dir`), each checked against the sha256 recorded."""
    directory = resolve_path(str(record["path"]), checkpoint_dir, str(record["config_file"]))
    places = [directory] if vocab_dir is None else [directory, vocab_dir]
    files = {}
    for name, expected in dict(record.get("tokenizer_files") or {}).items():
        # The names a run records are TOKENIZER_FILES': any other (`../x`, `/dev/zero`) is
        # a changed checkpoint, and the export would read or write it outside its folders.
        if name not in TOKENIZER_FILES or not isinstance(expected, str):
            raise ExportError(
                f"the checkpoint records {name!r} as a tokenizer file of the released model "
                f"the run started from, which no run records (it records "
                f"{', '.join(TOKENIZER_FILES)}): the checkpoint was changed after the run "
                "wrote it"
            )
        unread, changed = [], []
        for place in places:
            path = storage.join(place, name)
            try:
                data = storage.read_bytes(path, MAX_VOCAB_FILE_BYTES)
            except OSError as error:  # not there, or larger than any tokenizer file
                unread.append(f"{path} ({error.strerror or error})")
                continue
            if (sha256 := hashlib.sha256(data).hexdigest()) == expected:
                files[name] = data
                break
            changed.append(f"{path} (sha256 {sha256[:12]}…)")
        else:
            fix = "pass as --vocab DIR the released model's directory, as released"
            if changed:  # there, but changed: a file of another model, or edited
                raise ExportError(
                    f"{' and '.join(changed)} {'is' if len(changed) == 1 else 'are'} not the "
                    f"file the run started from (recorded {expected[:12]}…), the released "
                    f"model's {name}: restore its directory, or {fix}"
                )
            raise ExportError(
                f"cannot read {' nor '.join(unread)}, a file of the released model the run "
                f"started from: where the model moved, {fix}; or put it back where the run "
                "found it"
            )
    return files


def _released_vocab_sha256(files: dict[str, bytes]) -> str | None:
    """The sha256 of a released model's vocab.txt, or of the one its tokenizer.json's tokens
    make where it has none (pipelines/io/released_vocab.py); None with neither."""
    if VOCAB_FILE in files:
        return hashlib.sha256(files[VOCAB_FILE]).hexdigest()
    if TOKENIZER_FILE not in files:
        return None
    try:
        tokens = tokenizer_json_tokens(files[TOKENIZER_FILE], TOKENIZER_FILE)
    except VocabError as error:
        raise ExportError(f"the released model's {error}: the checkpoint is damaged") from error
    return hashlib.sha256(vocab_txt_bytes(tokens)).hexdigest()


# --- The command ----------------------------------------------------------------------------


def _size(location: str) -> int:
    with storage.open_seekable(location) as source:  # a ranged read on object storage
        return source.seek(0, os.SEEK_END)


def _parameter_count(weights: str) -> int:
    """The number of parameters a safetensors file holds, from its header alone."""
    header = safetensors_header(weights)
    return sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")


def run(argv: list[str] | None = None) -> int:
    """Export and report; return the exit code. Raises ExportError on bad input."""
    args = parse_arguments(argv)
    written = export_hf(args.checkpoint, args.output, args.vocab, args.overwrite)
    for location in written:
        print(f"{storage.redact(location)}  {_size(location):,} bytes")
    # Read back what was written (from the bucket, for a prefix): the summary describes the
    # files, not the intent.
    output = args.output.rstrip("/") if storage.is_remote(args.output) else args.output
    config = json.loads(storage.read_bytes(storage.join(output, CONFIG_FILE), 2**20))
    parameters = _parameter_count(storage.join(output, WEIGHTS_FILE))
    print(
        f"{storage.redact(output)}: HF {config['architectures'][0]}, "
        f"{config['num_hidden_layers']} layers × {config['hidden_size']}, "
        f"{parameters:,} parameters, {config['vocab_size']} token ids"
    )
    return 0


def run_saying(argv: list[str] | None = None) -> int:
    """`run`, a refusal said in one line (exit 2): the command's, and the demo's export. Ctrl-C
    or SIGTERM: one line, exit 130 or 143, no temporary file left (each file is written
    under a temporary name, then renamed: the others may be this export's or the last's)."""
    with StageStop() as stop:
        try:
            return run(argv)
        except (CheckpointError, OSError) as err:  # ExportError is a CheckpointError
            print(f"bertkit export-hf: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            if stop.signal is None:  # a caller's own handler (the demo's) says it
                raise
            stop.ending = True
            print(
                f"bertkit export-hf: interrupted ({stop.name}): --output may hold some files "
                "of this export beside the last one's; rerun it with --overwrite",
                file=sys.stderr,
            )
            return exit_code(stop.signal)


def main(argv: list[str] | None = None) -> None:
    sys.exit(run_saying(argv))


if __name__ == "__main__":
    main()
