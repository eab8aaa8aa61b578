"""A released BERT as the start of a run: `bertkit train --init-checkpoint DIR` with DIR a
transformers model directory (config.json with model_type "bert", and model.safetensors,
a sharded model.safetensors.index.json, or pytorch_model.bin read with weights_only=True),
saved from `BertForPreTraining`, `BertForMaskedLM` or `BertModel`.

    released = read_released("models/my-bert")          # config, HF-named tensors, files
    model, fresh, dropped = released_model(released, "mlm+nsp")  # as the trainer starts it
    check_shards(released, source, shards_vocab_dir)     # fits the shards (vocabulary…)
    record = start_record(released, checkpoints_dir)      # what its checkpoints record

The architecture is the directory's config.json; the weights are renamed by
trainer/hf_names.py (the mapping the export uses). What the directory has beyond a BERT's
tensors is refused in one line, but for what is known to carry nothing: the position_ids
and token_type_ids buffers, and the decoder weight and bias tied to the word embeddings and
`cls.predictions.bias` (checked equal, else refused). A head the directory lacks (BertModel
has no `cls.*`, BertForMaskedLM no pooler or NSP head) keeps the weights the seed drew.

A Google TF checkpoint directory (bert_config.json beside bert_model.ckpt.index) goes
through `_read_tensorflow`, which returns the same `Released`.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from pipelines.io import storage
from pipelines.io.recorded_paths import rebase_path, record_path
from pipelines.io.released_vocab import (
    recorded_strip_accents,
    released_casing,
    released_strip_accents,
    vocab_txt_of,
)
from pipelines.io.tf_checkpoint import TFCheckpointError, find_prefix, read_tf_bert
from pipelines.io.unpickling import load_failure, unpickling_refused
from pipelines.io.vocabulary import VocabError, parse_vocab_txt
from schemas.checks import load_json
from schemas.shards import PAIRS
from trainer.choices import MODEL_SIZES
from trainer.hf_names import (
    HF_PREFIX,
    MLM_HEAD,
    NSP_HEAD,
    POOLER,
    TIED_DECODER_BIAS,
    TIED_DECODER_WEIGHT,
    from_hf,
    hf_names,
)
from trainer.model import BertConfig, BertForPreTraining, shape_problem

if TYPE_CHECKING:
    from trainer.source import DataSource

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"
TF_CONFIG_FILE = "bert_config.json"
# The tokenizer files a released directory may hold: the export copies them byte for byte.
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
# Buffers some transformers versions save: arange(positions) and zeros, no weights.
_BUFFERS = ("bert.embeddings.position_ids", "bert.embeddings.token_type_ids")
# transformers' config fields bertkit's BertConfig takes as they are, and their defaults
# there (a config.json may leave a field out: transformers then uses its default).
_FIELDS = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "layer_norm_eps": 1e-12,
    "initializer_range": 0.02,
    "pad_token_id": 0,
}
# The heads, as the log names them, and their tensors by bertkit name.
HEADS = {"the MLM head": MLM_HEAD, "the pooler": POOLER, "the NSP head": NSP_HEAD}
_MAX_CONFIG_BYTES = 1 << 20


class ReleasedModelError(ValueError):
    """A released model directory the trainer cannot start from; the message says why."""


@dataclass(frozen=True)
class Released:
    """A released model as read: its transformers config, its tensors under
    BertForPreTraining's names ("bert." prefix), and the sha256 of every file read."""

    directory: str
    config: dict[str, Any]
    tensors: dict[str, Tensor]
    # file name → sha256 of its bytes: config.json, the weights files, the tokenizer files
    files: dict[str, str] = field(default_factory=dict)

    @property
    def config_sha256(self) -> str:
        return self.files.get(CONFIG_FILE) or self.files.get(TF_CONFIG_FILE, "")

    @property
    def weights_sha256(self) -> str:
        """One digest for the weights: of the weights files' sha256s, in name order."""
        names = sorted(n for n in self.files if n != CONFIG_FILE and n not in TOKENIZER_FILES)
        names = [n for n in names if n != TF_CONFIG_FILE]
        joined = "".join(f"{name}:{self.files[name]}\n" for name in names)
        return hashlib.sha256(joined.encode()).hexdigest()

    @property
    def tokenizer_files(self) -> dict[str, str]:
        return {name: sha for name, sha in self.files.items() if name in TOKENIZER_FILES}


def is_released_directory(location: str) -> bool:
    """Whether --init-checkpoint names a released model (a local directory with config.json
    or bert_config.json, or a Google TF checkpoint's prefix, DIR/model.ckpt-N, with
    bert_config.json in DIR), not a bertkit checkpoint or run."""
    if os.path.isfile(location + ".index"):
        return os.path.isfile(os.path.join(os.path.dirname(location), TF_CONFIG_FILE))
    return os.path.isdir(location) and any(
        os.path.isfile(os.path.join(location, name)) for name in (CONFIG_FILE, TF_CONFIG_FILE)
    )


def read_released(directory: str) -> Released:
    """Read a released BERT directory: transformers' (config.json) or Google's TF checkpoint
    (bert_config.json + bert_model.ckpt.*). Raises ReleasedModelError in one line."""
    if not os.path.isfile(os.path.join(directory, CONFIG_FILE)):
        return _read_tensorflow(directory)
    files: dict[str, str] = {}
    config = _json_file(directory, CONFIG_FILE, files)
    if config.get("model_type") != "bert":
        raise ReleasedModelError(
            f"{directory}/{CONFIG_FILE}: model_type is {config.get('model_type')!r}, not "
            "'bert': the trainer starts only from a BERT (BertForPreTraining, BertForMaskedLM "
            "or BertModel)"
        )
    tensors = _read_weights(directory, files)
    for name in TOKENIZER_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            files[name] = _sha256(path)
    return Released(directory, config, _normalised(tensors), files)


def _read_tensorflow(location: str) -> Released:
    """Google's TF checkpoint (bert_config.json, bert_model.ckpt.index and .data-*; or the
    prefix of one of several checkpoints in a directory), read without TensorFlow
    (pipelines/io/tf_checkpoint.py) into a `Released`: Google's variable names become
    transformers', bert_config.json a transformers config. The files recorded are
    bert_config.json, the checkpoint's .index and .data-* and the tokenizer files beside it."""
    try:
        prefix = find_prefix(location)
        if prefix is None:
            raise ReleasedModelError(
                f"{location} has neither {CONFIG_FILE} nor a TensorFlow checkpoint "
                "(bert_model.ckpt.index): pass a transformers BERT directory (config.json with "
                "model.safetensors or pytorch_model.bin) or Google's (bert_config.json with "
                "bert_model.ckpt.*)"
            )
        config, arrays = read_tf_bert(prefix)
    except TFCheckpointError as error:
        raise ReleasedModelError(str(error)) from error
    directory, stem = os.path.dirname(prefix) or ".", os.path.basename(prefix)
    files = {
        name: _sha256(os.path.join(directory, name))
        for name in sorted(os.listdir(directory))
        if name in (TF_CONFIG_FILE, *TOKENIZER_FILES)
        or name == f"{stem}.index"
        or name.startswith(f"{stem}.data-")
    }
    tensors = {name: torch.from_numpy(value) for name, value in arrays.items()}
    return Released(directory, config, tensors, files)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _json_file(directory: str, name: str, files: dict[str, str]) -> dict[str, Any]:
    path = os.path.join(directory, name)
    with open(path, "rb") as file:
        data = file.read(_MAX_CONFIG_BYTES + 1)
    try:
        value = load_json(data) if len(data) <= _MAX_CONFIG_BYTES else None
    except (UnicodeDecodeError, ValueError) as error:  # RecordError: nested too deep
        raise ReleasedModelError(f"{path}: not JSON ({error}); restore the file") from error
    if not isinstance(value, dict):
        raise ReleasedModelError(f"{path}: not a JSON object of at most 1 MiB; restore the file")
    files[name] = hashlib.sha256(data).hexdigest()
    return value


def _read_weights(directory: str, files: dict[str, str]) -> dict[str, Tensor]:
    """The tensors of model.safetensors (or its shards), else of pytorch_model.bin (or its
    shards), read with torch.load(weights_only=True): never a pickled class."""
    for index_name, single in ((SAFETENSORS_INDEX, SAFETENSORS_FILE), (PYTORCH_INDEX, None)):
        if os.path.isfile(os.path.join(directory, index_name)):
            weight_map = _json_file(directory, index_name, files).get("weight_map")
            if not isinstance(weight_map, dict) or not all(
                isinstance(name, str) for name in weight_map.values()
            ):
                raise ReleasedModelError(
                    f"{directory}/{index_name} has no weight_map of tensor names to file "
                    "names: restore the file"
                )
            tensors: dict[str, Tensor] = {}
            for name in sorted(set(weight_map.values())):
                if os.path.basename(name) != name:
                    raise ReleasedModelError(
                        f"{directory}/{index_name} names {name!r}, not a file beside it"
                    )
                tensors |= _read_weight_file(directory, name, files)
            return tensors
        if single and os.path.isfile(os.path.join(directory, single)):
            return _read_weight_file(directory, single, files)
    if os.path.isfile(os.path.join(directory, PYTORCH_FILE)):
        return _read_weight_file(directory, PYTORCH_FILE, files)
    raise ReleasedModelError(
        f"{directory} has {CONFIG_FILE} but no {SAFETENSORS_FILE}, {SAFETENSORS_INDEX} or "
        f"{PYTORCH_FILE}: save the model there with save_pretrained"
    )


def _read_weight_file(directory: str, name: str, files: dict[str, str]) -> dict[str, Tensor]:
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise ReleasedModelError(f"{path} is missing: its index names it; download it again")
    files[name] = _sha256(path)
    try:
        if name.endswith(".safetensors"):
            return load_file(path, device="cpu")
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    # What safetensors and torch.load raise on a file cut short, damaged or not theirs.
    except (
        SafetensorError,
        pickle.UnpicklingError,
        RuntimeError,
        EOFError,
        KeyError,
        ValueError,
    ) as error:
        if (refused := unpickling_refused(error)) is not None:
            raise ReleasedModelError(
                f"{path} holds objects other than tensors ({refused}), so it is refused, never "
                "unpickled: save the model as safetensors (save_pretrained writes "
                "model.safetensors), or download the model.safetensors it was released with"
            ) from error
        raise ReleasedModelError(
            f"{path} cannot be read ({load_failure(error)[:200]}); download it again, or save "
            "the model with save_pretrained"
        ) from error
    if not isinstance(loaded, dict) or not all(isinstance(v, Tensor) for v in loaded.values()):
        raise ReleasedModelError(f"{path} is not a state_dict (names → tensors)")
    return loaded


def _normalised(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """BertModel's names (no "bert." prefix) and TF-era LayerNorm names (gamma, beta) as
    BertForPreTraining's today."""
    prefixed = any(name.startswith(HF_PREFIX) for name in tensors)
    result = {}
    for name, tensor in tensors.items():
        if not prefixed and not name.startswith("cls."):
            name = HF_PREFIX + name
        if ".LayerNorm." in name:
            name = name.removesuffix(".gamma") + ".weight" if name.endswith(".gamma") else name
            name = name.removesuffix(".beta") + ".bias" if name.endswith(".beta") else name
        result[name] = tensor
    return result


def preset_name(config: BertConfig) -> str | None:
    """The --model preset (trainer/choices.py MODEL_SIZES) of the same shape, or None."""
    for name, (layers, hidden, heads) in MODEL_SIZES.items():
        shape = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads)
        if shape == (layers, hidden, heads) and config.intermediate_size == 4 * hidden:
            return name
    return None


def released_model_config(
    released: Released, objective: str, dropout: Mapping[str, float] | None = None
) -> BertConfig:
    """bertkit's BertConfig of the released model: its config.json's sizes, positions, type
    vocabulary, epsilon, dropout and initializer range; the activation must be "gelu" (the
    exact erf GELU bertkit has) and the positions absolute. `dropout` overrides the
    config.json's rates it names (hidden_dropout_prob, attention_probs_dropout_prob:
    trainer/config.py dropout_overrides); a rate it leaves out stays the released model's."""
    config_file = CONFIG_FILE if CONFIG_FILE in released.files else TF_CONFIG_FILE
    where = f"{released.directory}/{config_file}"
    config = released.config
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise ReleasedModelError(
            f"{where}: hidden_act {act!r}; bertkit's BERT has the exact (erf) GELU, "
            "transformers' 'gelu', and no other activation"
        )
    positions = config.get("position_embedding_type", "absolute")
    if positions != "absolute":
        raise ReleasedModelError(
            f"{where}: position_embedding_type {positions!r}; bertkit's BERT has absolute "
            "learned positions only"
        )
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise ReleasedModelError(f"{where}: a decoder BERT; start from an encoder one")
    values: dict[str, Any] = {name: config.get(name, default) for name, default in _FIELDS.items()}
    if values["pad_token_id"] is None:
        values["pad_token_id"] = 0
    if "vocab_size" not in config:
        raise ReleasedModelError(f"{where} has no vocab_size: restore the file")
    values |= dropout or {}
    try:
        return BertConfig(vocab_size=config["vocab_size"], objective=objective, **values)
    except (TypeError, ValueError) as error:
        raise ReleasedModelError(f"{where}: {error}") from error


def released_state(
    released: Released, config: BertConfig, drawn: dict[str, Tensor]
) -> tuple[dict[str, Tensor], list[str], list[str]]:
    """(the model's state_dict, the heads that keep the seed's weights, the heads dropped):
    the released tensors renamed (trainer/hf_names.py) and checked, over `drawn` (the seeded
    model's own state_dict) for the heads the directory lacks; the pooler and NSP head are
    dropped where `config` has none ("mlm")."""
    where = released.directory
    hf = dict(released.tensors)
    for name in _BUFFERS:
        hf.pop(name, None)  # buffers, not weights: the model makes its own
    for tied, source in (
        (TIED_DECODER_WEIGHT, "bert.embeddings.word_embeddings.weight"),
        (TIED_DECODER_BIAS, "cls.predictions.bias"),
    ):
        if tied in hf:
            tensor = hf.pop(tied)
            if source not in hf or not torch.equal(tensor, hf[source]):
                raise ReleasedModelError(
                    f"{where}: {tied} is not {source} (tied in BERT, equal in a saved "
                    "model): this model is not one bertkit's BERT can hold"
                )
    known = hf_names(config.num_hidden_layers)
    unknown = sorted(set(hf) - known)
    if unknown:
        raise ReleasedModelError(
            f"{where}: the weights hold {unknown[0]}"
            + (f" and {len(unknown) - 1} more" if len(unknown) > 1 else "")
            + ", which no BERT with this config.json has (a fine-tuned model's head?): "
            "start from a BertForPreTraining, BertForMaskedLM or BertModel"
        )
    state = from_hf(hf, config.num_hidden_layers)
    fresh, dropped = [], []
    for head, names in HEADS.items():
        have = [name for name in names if name in state]
        if have and len(have) < len(names):
            missing = next(hf_name for ours, hf_name in names.items() if ours not in state)
            raise ReleasedModelError(
                f"{where}: {head} is incomplete ({missing} is missing): the file is damaged"
            )
        wanted = head == "the MLM head" or config.nsp
        if not wanted:
            if have:
                dropped.append(head)
                for name in names:
                    del state[name]
        elif not have:
            fresh.append(head)
            state |= {name: drawn[name] for name in names}
    missing = sorted(set(drawn) - set(state))
    if missing:
        raise ReleasedModelError(
            f"{where}: the weights lack {missing[0]} (bertkit's name) of a "
            f"{config.num_hidden_layers}-layer BERT: the file is damaged or of another model"
        )
    for name, tensor in state.items():
        if tensor.shape != drawn[name].shape:
            raise ReleasedModelError(
                f"{where}: {name} (bertkit's name) has shape {tuple(tensor.shape)}, its "
                f"config.json makes {tuple(drawn[name].shape)}: the files disagree"
            )
    return state, fresh, dropped


def _check_tokenizer(where: str, shards_cased: bool | None, shards_strip: bool | None) -> None:
    """Refuse a released directory whose tokenizer, which an export ships, does not cut text
    as the shards' did: its casing, or its accent stripping (unset: as its casing says)."""
    try:
        said, said_by = released_casing(where)
        strip, strip_by = released_strip_accents(where)
    except VocabError as error:
        raise ReleasedModelError(str(error)) from error
    fix = f"make the shards with `bertkit examples --vocab {where}`, which takes its"
    cut = "its tokenizer, which an export ships, does not cut text as the shards were cut"
    if said is not None and shards_cased is not None and said != shards_cased:
        raise ReleasedModelError(
            f"{where} is {_casing(said)} (its {said_by}), the shards were made "
            f"{_casing(shards_cased)} (their manifest): {cut}; {fix} casing"
        )
    cased = said if said is not None else shards_cased
    strip_by = f"its {strip_by}"
    if strip is None and cased is not None:
        strip, strip_by = not cased, f"{_casing(cased)}, its strip_accents unset"
    if strip is None or shards_strip is None or strip == shards_strip:
        return
    raise ReleasedModelError(
        f"{where} {'strips' if strip else 'keeps'} accents ({strip_by}), the shards were made "
        f"{'stripping' if shards_strip else 'keeping'} them (their manifest): {cut}; {fix} "
        "accent stripping"
    )


def _casing(cased: bool) -> str:
    return "cased" if cased else "uncased"


def released_model(
    released: Released, objective: str, dropout: Mapping[str, float] | None = None
) -> tuple[BertForPreTraining, list[str], list[str]]:
    """bertkit's model holding the released weights (on the CPU), as the trainer starts it:
    built from its config (drawing the seeded initial weights, which the heads the directory
    lacks keep), then loaded strictly. Returns it, the fresh heads and the dropped ones."""
    config = released_model_config(released, objective, dropout)
    problem = shape_problem(config, released.tensors)
    if problem:
        config_file = CONFIG_FILE if CONFIG_FILE in released.files else TF_CONFIG_FILE
        raise ReleasedModelError(
            f"{released.directory}/{config_file} says {problem}: the config is not the "
            "weights' (restore the model's own config.json)"
        )
    model = BertForPreTraining(config)
    state, fresh, dropped = released_state(released, config, model.state_dict())
    model.load_state_dict(state, strict=True)
    return model, fresh, dropped


def check_shards(released: Released, source: DataSource, vocab_dir: str | None) -> None:
    """Refuse, in one line before any work, shards the released model cannot train on, by
    their manifest: another vocabulary, casing or accent stripping (`check_vocabulary`;
    `vocab_dir`: the shards' vocabulary directory, or --vocab), or sentence pairs (segment B
    is token type 1) for a model of one token type, whatever the objective."""
    record = source.manifest.vocab if source.manifest is not None else {}
    sha256, cased = record.get("sha256"), record.get("cased")
    check_vocabulary(released, sha256, vocab_dir, cased, recorded_strip_accents(record))
    types = released_model_config(released, "mlm").type_vocab_size
    if source.manifest is not None and source.manifest.sequences == PAIRS and types < 2:
        config_file = CONFIG_FILE if CONFIG_FILE in released.files else TF_CONFIG_FILE
        raise ReleasedModelError(
            f"{released.directory}/{config_file} has type_vocab_size {types}, and "
            f"{storage.redact(source.manifest_url or '')} holds sentence pairs, whose segment "
            f"B is token type 1, which a model of {types} token type cannot embed (under "
            "--objective mlm too): make full-sentence shards for it (`bertkit examples "
            "--sequences full-sentences`, token type 0 throughout), which train with "
            "--objective mlm"
        )


def check_vocabulary(
    released: Released,
    shards_sha256: str | None,
    shards_vocab: str | None,
    shards_cased: bool | None = None,
    shards_strip_accents: bool | None = None,
) -> None:
    """Refuse, in one line, a released model whose vocabulary is not the shards': its
    vocab.txt must have the sha256 the shards' manifest records; where it does not, the line
    names the first id whose token differs (read from `shards_vocab`, the shards' vocabulary
    directory, where there is one). Where the directory says its casing, and its accent
    stripping, they must be the shards' (`shards_cased`, `shards_strip_accents`; None: not
    known): its tokenizer, which an export ships, cuts text so."""
    where = released.directory
    if "vocab.txt" not in released.files and "tokenizer.json" not in released.files:
        raise ReleasedModelError(
            f"{where} has no vocab.txt or tokenizer.json, so its vocabulary cannot be checked "
            "against the shards': put the tokenizer files the model was released with beside "
            "its config.json"
        )
    # Its vocab.txt, or (transformers 5 saves none) the one its tokenizer.json's tokens make.
    try:
        model_vocab, model_bytes = vocab_txt_of(where)
    except VocabError as error:
        raise ReleasedModelError(str(error)) from error
    ours = hashlib.sha256(model_bytes).hexdigest()
    if ours == shards_sha256:
        _check_tokenizer(where, shards_cased, shards_strip_accents)
        return
    if shards_sha256 is None:
        raise ReleasedModelError(
            f"{where}: the shards' manifest records no vocab.txt sha256 to check the model's "
            "vocabulary against: make the shards with `bertkit examples --vocab "
            f"{where}`"
        )
    fix = f"make the shards with the model's vocabulary (`bertkit examples --vocab {where}`)"
    theirs = None
    if shards_vocab is not None:
        try:
            theirs = parse_vocab_txt(vocab_txt_of(shards_vocab)[1])
        except (OSError, UnicodeDecodeError, VocabError):
            theirs = None  # the sha256s alone then say that they differ
    if theirs is None:
        raise ReleasedModelError(
            f"{model_vocab} (sha256 {ours[:12]}…) is not the vocabulary the shards were "
            f"made with (sha256 {shards_sha256[:12]}…): {fix}"
        )
    tokens = parse_vocab_txt(model_bytes)
    for index, (mine, shards) in enumerate(zip(tokens, theirs, strict=False)):
        if mine != shards:
            raise ReleasedModelError(
                f"{model_vocab} differs from the shards' vocabulary at id {index}: the "
                f"model's token is {mine!r}, the shards' {shards!r}: {fix}"
            )
    raise ReleasedModelError(
        f"{model_vocab} has {len(tokens)} tokens, the shards' vocabulary {len(theirs)} "
        f"(the first {min(len(tokens), len(theirs))} the same): {fix}"
    )


def start_line(released: Released, config: BertConfig, fresh: list[str], dropped: list[str]) -> str:
    """The set-up log's line on the released model a run starts from, naming the heads that
    start from the seed and the ones dropped."""
    line = (
        f"--init-checkpoint: the released BERT at {released.directory} "
        f"({config.num_hidden_layers} layers × {config.hidden_size}, "
        f"{config.num_attention_heads} heads, {config.max_position_embeddings} positions)"
    )
    if fresh:
        line += f"; {' and '.join(fresh)} start{'s' if len(fresh) == 1 else ''} from the seed"
        line += " (it has none)"
    if "the NSP head" in fresh:  # its export: a BertForPreTraining, which the original was not
        line += (
            ": the export is a BertForPreTraining (--objective mlm leaves the pooler and NSP "
            "head out: a BertForMaskedLM)"
        )
    if dropped:
        line += f"; {' and '.join(dropped)} dropped (--objective mlm)"
    if not fresh and not dropped:
        line += "; every head from it"
    return line


# --- What a checkpoint records of it ------------------------------------------------------

START_RELEASED = "released"  # the "kind" of a checkpoint's start record for a released model


def start_record(released: Released, checkpoint_dir: str) -> dict[str, Any]:
    """What the run's checkpoints (in `checkpoint_dir`) record of the released model it
    started from: its directory as a recorded path (pipelines/io/recorded_paths.py), the
    sha256 of its config and weights, its tokenizer files' sha256s (the export copies them)
    and its config (the export writes its fields)."""
    config_file = CONFIG_FILE if CONFIG_FILE in released.files else TF_CONFIG_FILE
    return {
        "kind": START_RELEASED,
        "path": record_path(released.directory, checkpoint_dir),
        "config_file": config_file,
        "config_sha256": released.config_sha256,
        "weights_sha256": released.weights_sha256,
        "tokenizer_files": released.tokenizer_files,
        "config": released.config,
    }


def carried_start(record: dict[str, Any], from_dir: str, to_dir: str) -> dict[str, Any]:
    """A start record read from a checkpoint in `from_dir` as a checkpoint in `to_dir`
    records it (a resume's, or a run started from another run's checkpoint)."""
    if record.get("kind") != START_RELEASED:
        return record
    path = rebase_path(str(record["path"]), from_dir, to_dir, str(record["config_file"]))
    return {**record, "path": path}
