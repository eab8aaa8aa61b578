"""Google's TensorFlow BERT checkpoints (`bert_model.ckpt.*`), read without TensorFlow. Beam-free.

google-research/bert released its models (and BioBERT and other TF1 BERTs were made with its
code) as a TensorFlow tensor bundle beside `bert_config.json` and `vocab.txt`:
- `PREFIX.index`: a LevelDB-format table. Data blocks of prefix-compressed keys with restart
  points, an index block pointing at them, a 48-byte footer (the two blocks' handles and a
  magic number); each block is followed by a compression byte and a masked crc32c. The keys
  are variable names, each value a `BundleEntryProto` (dtype, shape, shard, offset, size,
  masked crc32c of the tensor's bytes); the empty key's value is a `BundleHeaderProto`
  (number of data files, endianness).
- `PREFIX.data-NNNNN-of-MMMMM`: the tensors' raw little-endian bytes at those offsets.

This module decodes just that: the table (uncompressed blocks, as TensorFlow's Saver writes
them, each block's crc32c checked), the protobuf fields of the entries, float32 tensors (each
one's crc32c checked), and `bert_config.json`, which it turns into a transformers-style config
(`model_type: bert`). Google's variable names become transformers' `BertForPreTraining` names,
dense kernels transposed as transformers stores them; what training leaves beside the weights
(Adam's `adam_m`/`adam_v` slots, `global_step`) is dropped.

    config, tensors = read_tf_bert("uncased_L-12_H-768_A-12")

Anything else is refused in one line naming the file: a compressed or damaged block, a
truncated file, another dtype, a partitioned variable, an unknown variable name, a shape the
config contradicts.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

import numpy as np

from pipelines.io import storage
from pipelines.io.crc32c import crc32c, unmask_crc

CONFIG_FILE = "bert_config.json"
DEFAULT_PREFIX = "bert_model.ckpt"

_TABLE_MAGIC = 0xDB4775248B80FB57  # LevelDB's, which TensorFlow's table format keeps
_FOOTER_BYTES = 48
_TRAILER_BYTES = 5  # a block's compression byte and its masked crc32c
_MAX_INDEX_BYTES = 256 << 20  # BERT-large with its Adam slots needs well under 1 MiB
_MAX_CONFIG_BYTES = 1 << 20
_DT_FLOAT = 1
_DTYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
           7: "string", 9: "int64", 10: "bool", 14: "bfloat16", 19: "float16"}  # fmt: skip


class TFCheckpointError(ValueError):
    """A TensorFlow checkpoint this reader cannot take; the message says what to do."""


# --- protobuf wire format: the few fields a bundle's entries use -------------------------


def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _damaged(where, "a varint runs past its record")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes, where: str) -> list[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: ints for varint and fixed fields, bytes
    for length-delimited ones."""
    fields: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos, where)
        number, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos, where)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(buf):
                raise _damaged(where, "a fixed-width field runs past its record")
            value = int.from_bytes(buf[pos : pos + width], "little")
            pos += width
        elif wire == 2:
            size, pos = _varint(buf, pos, where)
            if pos + size > len(buf):
                raise _damaged(where, "a length-delimited field runs past its record")
            value = buf[pos : pos + size]
            pos += size
        else:
            raise _damaged(where, f"protobuf wire type {wire} in field {number}")
        fields.append((number, value))
    return fields


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class BundleEntry:
    """One variable's place in the data files (BundleEntryProto's fields)."""

    dtype: int
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int
    sliced: bool


def _entry(value: bytes, where: str) -> BundleEntry:
    got: dict[str, int | tuple[int, ...] | bool] = {"sliced": False}
    for number, field in _fields(value, where):
        if number == 1 and isinstance(field, int):
            got["dtype"] = field
        elif number == 2 and isinstance(field, bytes):
            got["shape"] = _shape(field, where)
        elif number in (3, 4, 5) and isinstance(field, int):
            got[{3: "shard_id", 4: "offset", 5: "size"}[number]] = _signed64(field)
        elif number == 6 and isinstance(field, int):
            got["crc32c"] = field
        elif number == 7:
            got["sliced"] = True
    got.setdefault("shape", ())
    for name in ("dtype", "shard_id", "offset", "size", "crc32c"):
        got.setdefault(name, 0)
    return BundleEntry(**got)  # type: ignore[arg-type]


def _shape(value: bytes, where: str) -> tuple[int, ...]:
    dims = []
    for number, field in _fields(value, where):
        if number == 2 and isinstance(field, bytes):
            size = 0
            for dim_number, dim_field in _fields(field, where):
                if dim_number == 1 and isinstance(dim_field, int):
                    size = _signed64(dim_field)
            dims.append(size)
        elif number == 3 and field:
            raise _damaged(where, "a shape of unknown rank")
    if any(size < 0 for size in dims):
        raise _damaged(where, f"a shape with an unknown dimension {tuple(dims)}")
    return tuple(dims)


def _damaged(where: str, what: str) -> TFCheckpointError:
    return TFCheckpointError(
        f"{where} is damaged ({what}): it is not a TensorFlow checkpoint as TensorFlow wrote "
        "it; download or copy the checkpoint again"
    )


# --- the index: a LevelDB-format table ---------------------------------------------------


def _block(table: bytes, handle: bytes, path: str) -> bytes:
    """A block's contents, its trailer checked: uncompressed, crc32c as stored."""
    offset, pos = _varint(handle, 0, path)
    size, _ = _varint(handle, pos, path)
    end = offset + size + _TRAILER_BYTES
    if end > len(table) - _FOOTER_BYTES:
        raise _damaged(path, f"the block at byte {offset} runs past the table's end")
    kind = table[offset + size]
    if kind != 0:
        raise TFCheckpointError(
            f"{path}: the block at byte {offset} is compressed (type {kind}"
            f"{', snappy' if kind == 1 else ''}); this reader takes the uncompressed index "
            "TensorFlow's Saver writes: convert the checkpoint with transformers instead "
            "(docs/training.md, 'A Google TensorFlow checkpoint')"
        )
    stored = unmask_crc(int.from_bytes(table[offset + size + 1 : end], "little"))
    if crc32c(table[offset : offset + size + 1]) != stored:
        raise _damaged(path, f"the block at byte {offset} fails its crc32c")
    return table[offset : offset + size]


def _block_entries(block: bytes, path: str) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise _damaged(path, "a block shorter than its restart count")
    restarts = int.from_bytes(block[-4:], "little")
    limit = len(block) - 4 - 4 * restarts
    if limit < 0:
        raise _damaged(path, f"a block of {len(block)} bytes claims {restarts} restart points")
    entries: list[tuple[bytes, bytes]] = []
    key, pos = b"", 0
    while pos < limit:
        shared, pos = _varint(block, pos, path)
        unshared, pos = _varint(block, pos, path)
        value_size, pos = _varint(block, pos, path)
        if shared > len(key) or pos + unshared + value_size > limit:
            raise _damaged(path, "a key or value runs past its block")
        following = key[:shared] + block[pos : pos + unshared]
        if entries and following <= key:
            raise _damaged(path, "keys out of order")
        key = following
        pos += unshared
        entries.append((key, block[pos : pos + value_size]))
        pos += value_size
    return entries


def read_index(path: str) -> tuple[int, dict[str, BundleEntry]]:
    """A checkpoint's `.index`: its number of data files and every variable's entry."""
    table = storage.read_bytes(path, _MAX_INDEX_BYTES)
    if len(table) < _FOOTER_BYTES:
        raise _damaged(path, f"{len(table)} bytes, shorter than the table's footer")
    footer = table[-_FOOTER_BYTES:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise _damaged(path, "its last 8 bytes are not the table's magic number")
    _, pos = _varint(footer, 0, path)  # the metaindex block's handle, which is always empty
    _, pos = _varint(footer, pos, path)
    index_handle = footer[pos:]
    num_shards = None
    entries: dict[str, BundleEntry] = {}
    for _, data_handle in _block_entries(_block(table, index_handle, path), path):
        for key, value in _block_entries(_block(table, data_handle, path), path):
            if key == b"":
                num_shards = _header(value, path)
                continue
            name = key.decode("utf-8", errors="replace")
            entries[name] = _entry(value, f"{path} (variable {name})")
    if num_shards is None:
        raise _damaged(path, "no bundle header")
    return num_shards, entries


def _header(value: bytes, path: str) -> int:
    fields = dict(_fields(value, f"{path} (bundle header)"))
    if fields.get(2, 0) != 0:
        raise TFCheckpointError(
            f"{path}: a big-endian checkpoint; this reader takes the little-endian ones "
            "TensorFlow writes on x86 and ARM: convert it with transformers on the machine "
            "that wrote it (docs/training.md, 'A Google TensorFlow checkpoint')"
        )
    num_shards = fields.get(1, 1)
    if not isinstance(num_shards, int) or num_shards < 1:
        raise _damaged(f"{path} (bundle header)", f"{num_shards} data files")
    return num_shards


# --- Google's names → transformers' names ------------------------------------------------

_EMBEDDINGS = {
    f"bert/embeddings/{kind}_embeddings": f"bert.embeddings.{kind}_embeddings.weight"
    for kind in ("word", "position", "token_type")
}
_MODULES = {
    "bert/embeddings/LayerNorm": "bert.embeddings.LayerNorm",
    "bert/pooler/dense": "bert.pooler.dense",
    "cls/predictions/transform/dense": "cls.predictions.transform.dense",
    "cls/predictions/transform/LayerNorm": "cls.predictions.transform.LayerNorm",
}
_LAYER_MODULES = (
    "attention/self/query", "attention/self/key", "attention/self/value",
    "attention/output/dense", "attention/output/LayerNorm", "intermediate/dense",
    "output/dense", "output/LayerNorm",
)  # fmt: skip
_HEADS = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",  # [2, H] as stored
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}
# A dense layer's kernel is [in, out] in TensorFlow, a Linear's weight [out, in] in torch.
_DENSE_LEAVES = {"kernel": ("weight", True), "bias": ("bias", False)}
_NORM_LEAVES = {"gamma": ("weight", False), "beta": ("bias", False)}
_LAYER = re.compile(r"bert/encoder/layer_(\d+)/(.+)/([^/]+)")
# What training keeps beside the weights: Adam's moments and the step counter.
_TRAINING_STATE = re.compile(r"(.+/adam_[mv]|global_step)")


def hf_name(google_name: str) -> tuple[str, bool] | None:
    """transformers' name for a Google BERT variable and whether its value is transposed;
    None for training state (Adam's slots, global_step). Raises TFCheckpointError for a name
    that is neither."""
    if _TRAINING_STATE.fullmatch(google_name):
        return None
    if google_name in _EMBEDDINGS:
        return _EMBEDDINGS[google_name], False
    if google_name in _HEADS:
        return _HEADS[google_name], False
    module, _, leaf = google_name.rpartition("/")
    layer = _LAYER.fullmatch(google_name)
    if layer and layer.group(2) in _LAYER_MODULES:
        module, leaf = layer.group(2), layer.group(3)
        hf_module = f"bert.encoder.layer.{int(layer.group(1))}.{module.replace('/', '.')}"
    elif module in _MODULES:
        hf_module = _MODULES[module]
    else:
        hf_module = ""
    leaves = _NORM_LEAVES if module.endswith("LayerNorm") else _DENSE_LEAVES
    if not hf_module or leaf not in leaves:
        raise TFCheckpointError(
            f"variable {google_name!r} is not part of google-research/bert's BERT or its "
            "pre-training heads; this reader takes those only: convert the checkpoint with "
            "the code that made it"
        )
    hf_leaf, transpose = leaves[leaf]
    return f"{hf_module}.{hf_leaf}", transpose


# --- bert_config.json → a transformers-style config --------------------------------------

_REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "max_position_embeddings", "type_vocab_size")  # fmt: skip
_OPTIONAL = ("hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
             "initializer_range")  # fmt: skip


def hf_config(google: dict, path: str) -> dict:
    """transformers' BertConfig fields for a Google `bert_config.json`. Its other keys
    (multilingual BERT's `pooler_*` and `directionality`) describe the pooler every BERT has
    and are not carried. Google's "gelu" is transformers' "gelu", as transformers' own
    conversion reads it; epsilon is Google's layer_norm's 1e-12."""
    missing = [key for key in _REQUIRED if not isinstance(google.get(key), int)]
    if missing:
        raise TFCheckpointError(
            f"{path}: no integer {', '.join(missing)}; a Google BERT config names all of "
            f"{', '.join(_REQUIRED)}: use the bert_config.json released with the checkpoint"
        )
    config = {"architectures": ["BertForPreTraining"], "model_type": "bert"}
    config.update({key: google[key] for key in _REQUIRED + _OPTIONAL if key in google})
    config.setdefault("hidden_act", "gelu")
    config.update({"layer_norm_eps": 1e-12, "pad_token_id": 0})
    return config


def _expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    shapes = {
        "bert.embeddings.word_embeddings.weight": (v, h),
        "bert.embeddings.position_embeddings.weight": (config["max_position_embeddings"], h),
        "bert.embeddings.token_type_embeddings.weight": (config["type_vocab_size"], h),
        "cls.predictions.bias": (v,),
        "cls.seq_relationship.weight": (2, h),
        "cls.seq_relationship.bias": (2,),
    }
    modules = {name: (h, h) for name in _MODULES.values()}
    for n in range(config["num_hidden_layers"]):
        for module in _LAYER_MODULES:
            size = {"intermediate/dense": (i, h), "output/dense": (h, i)}.get(module, (h, h))
            modules[f"bert.encoder.layer.{n}.{module.replace('/', '.')}"] = size
    for module, (out, into) in modules.items():
        if module.endswith("LayerNorm"):
            shapes[f"{module}.weight"] = shapes[f"{module}.bias"] = (out,)
        else:
            shapes[f"{module}.weight"], shapes[f"{module}.bias"] = (out, into), (out,)
    return shapes


# --- the whole checkpoint ----------------------------------------------------------------


def find_prefix(directory_or_prefix: str) -> str | None:
    """The checkpoint prefix a path names (a directory holding one `*.index`, or the prefix
    itself), or None where it holds no TensorFlow checkpoint."""
    path = directory_or_prefix.rstrip("/") or "/"
    if storage.exists(path + ".index"):
        return path
    if storage.is_remote(path):
        prefix = storage.join(path + "/", DEFAULT_PREFIX)
        return prefix if storage.exists(prefix + ".index") else None
    if not os.path.isdir(path):
        return None
    indexes = sorted(name for name in os.listdir(path) if name.endswith(".index"))
    if len(indexes) > 1:
        raise TFCheckpointError(
            f"{path} holds {len(indexes)} TensorFlow checkpoints ({', '.join(indexes)}): "
            "pass the one to start from as its prefix (the path without '.index')"
        )
    return os.path.join(path, indexes[0][: -len(".index")]) if indexes else None


def read_tf_bert(directory_or_prefix: str) -> tuple[dict, dict[str, np.ndarray]]:
    """A Google BERT checkpoint as (transformers-style config, float32 tensors by
    transformers' BertForPreTraining names), from its directory or its prefix, with the
    `bert_config.json` beside it."""
    prefix = find_prefix(directory_or_prefix)
    if prefix is None:
        raise TFCheckpointError(
            f"{directory_or_prefix}: no TensorFlow checkpoint (no {DEFAULT_PREFIX}.index or "
            "other *.index); pass the directory a Google BERT zip unpacks to"
        )
    config_path = storage.join(storage.parent(prefix) + "/", CONFIG_FILE)
    try:
        google = json.loads(storage.read_text(config_path, _MAX_CONFIG_BYTES))
    except FileNotFoundError as error:
        raise TFCheckpointError(
            f"{config_path} is missing: a Google BERT checkpoint comes with its "
            "bert_config.json; put it beside the checkpoint"
        ) from error
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TFCheckpointError(f"{config_path}: not JSON ({error}); restore the file") from error
    if not isinstance(google, dict):
        raise TFCheckpointError(f"{config_path}: not a JSON object; restore the file")
    config = hf_config(google, config_path)
    index_path = prefix + ".index"
    num_shards, entries = read_index(index_path)
    wanted = _wanted(entries, config, num_shards, index_path)
    return config, _read_tensors(prefix, num_shards, wanted, index_path)


def _wanted(
    entries: dict[str, BundleEntry], config: dict, num_shards: int, index_path: str
) -> dict[str, tuple[str, bool, BundleEntry]]:
    """Google name → (transformers name, transposed, entry), each checked against the config."""
    shapes = _expected_shapes(config)
    wanted = {}
    for name, entry in entries.items():
        try:
            mapped = hf_name(name)
        except TFCheckpointError as error:
            raise TFCheckpointError(f"{index_path}: {error}") from None
        if mapped is None:
            continue
        hf, transpose = mapped
        if entry.sliced:
            raise TFCheckpointError(
                f"{index_path}: variable {name} is partitioned; this reader takes whole "
                "variables only: convert the checkpoint with transformers instead "
                "(docs/training.md, 'A Google TensorFlow checkpoint')"
            )
        if entry.dtype != _DT_FLOAT:
            raise TFCheckpointError(
                f"{index_path}: variable {name} is {_DTYPES.get(entry.dtype, entry.dtype)}; "
                "this reader takes float32 checkpoints, as Google released them: convert "
                "this one with transformers instead (docs/training.md)"
            )
        if hf not in shapes:  # a layer past num_hidden_layers
            raise TFCheckpointError(
                f"{index_path}: variable {name} is beyond the {config['num_hidden_layers']} "
                f"layers {CONFIG_FILE} gives; use the config released with this checkpoint"
            )
        expected = shapes[hf][::-1] if transpose else shapes[hf]
        if entry.shape != expected:
            raise TFCheckpointError(
                f"{index_path}: variable {name} has shape {list(entry.shape)} where "
                f"{CONFIG_FILE} gives {list(expected)}; use the config released with this "
                "checkpoint"
            )
        if entry.size != 4 * int(np.prod(entry.shape)) or not 0 <= entry.shard_id < num_shards:
            raise _damaged(index_path, f"variable {name}'s size or data file is not its shape's")
        wanted[name] = (hf, transpose, entry)
    missing = sorted(
        name
        for name in set(shapes) - {hf for hf, _, _ in wanted.values()}
        if name.startswith("bert.")
    )
    if missing:
        raise TFCheckpointError(
            f"{index_path}: no {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}: "
            "not a whole BERT encoder as the config beside it describes; use the checkpoint "
            "and config released together"
        )
    return wanted


def _read_tensors(
    prefix: str, num_shards: int, wanted: dict[str, tuple[str, bool, BundleEntry]], index: str
) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for shard in range(num_shards):
        placed = sorted(
            (e.offset, name) for name, (_, _, e) in wanted.items() if e.shard_id == shard
        )
        if not placed:
            continue
        path = f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"
        try:
            stream = storage.open_seekable(path)
        except FileNotFoundError as error:
            raise TFCheckpointError(
                f"{path} is missing; {index} stores variables in it: copy the checkpoint's "
                "every .data-* file beside its .index"
            ) from error
        with stream:
            for offset, name in placed:
                hf, transpose, entry = wanted[name]
                stream.seek(offset)
                data = storage.read_exactly(stream, entry.size)
                if len(data) < entry.size:
                    raise TFCheckpointError(
                        f"{path} ends inside variable {name} (bytes {offset:,} to "
                        f"{offset + entry.size:,}): the file is truncated; download or copy "
                        "the checkpoint again"
                    )
                if crc32c(data) != unmask_crc(entry.crc32c):
                    raise _damaged(path, f"variable {name}'s bytes fail their crc32c")
                value = np.frombuffer(data, dtype="<f4").reshape(entry.shape)
                # a copy: writable (torch.from_numpy wants that), native order, C layout
                tensors[hf] = np.array(value.T if transpose else value, np.float32, order="C")
    return tensors
