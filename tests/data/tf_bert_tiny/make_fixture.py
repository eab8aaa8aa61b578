"""Writes the tiny Google-format BERT checkpoint in this directory. Needs TensorFlow; the
tests never run it (they read what it wrote, committed beside it).

Run it in a throwaway venv, never a project dependency:

    python3.11 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu safetensors
    /tmp/tfvenv/bin/python tests/data/tf_bert_tiny/make_fixture.py

It saves a BERT of Google's shape (vocabulary 40, hidden 8, 2 layers, 2 heads, intermediate
16, 16 positions) with `tf.compat.v1.train.Saver`, as google-research/bert's run_pretraining.py
does, under Google's variable names, with the Adam slots (`adam_m`, `adam_v`) and
`global_step` a training checkpoint carries. The values are deterministic (numpy, seed 38), so
running it again writes the same tensors. Beside the checkpoint it writes:
- `bert_config.json` and `vocab.txt` as Google's release zips hold them;
- `expected.safetensors`: the same values under transformers' `BertForPreTraining` names,
  with the dense kernels transposed as transformers stores them: what a reader must return;
- `float16/`: a checkpoint whose word embeddings are float16 (a dtype the reader refuses);
- `sharded/`: the model saved over two CPU devices with `Saver(sharded=True)`: two data files;
- `unknown/`: a checkpoint whose only variable is no part of Google's BERT (an adapter's).

With `--bert-base DIR` it writes, instead, a checkpoint of BERT-base's shape (random values,
with the Adam slots) and its bert_config.json into DIR, for `python -m bench.tf_checkpoint`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

HERE = Path(__file__).resolve().parent
PREFIX = "bert_model.ckpt"

CONFIG = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 8,
    "initializer_range": 0.02,
    "intermediate_size": 16,
    "max_position_embeddings": 16,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "type_vocab_size": 2,
    "vocab_size": 40,
}

# Google's layout: [PAD], [unused*], [UNK], [CLS], [SEP], [MASK], then the pieces.
VOCAB = [
    "[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "a", "of", "and", "to", "in", "is", "was", "it", "he", "she", "they", "alice",
    "rabbit", "queen", "said", "little", "time", "down", "very", "what", "cat", "king",
    "##s", "##ed", "##ing", "##ly", ",", ".", "!", "?", "'", "-",
]  # fmt: skip


def google_shapes() -> dict[str, tuple[int, ...]]:
    """Every trainable variable of google-research/bert's BertModel plus its pre-training
    heads, by Google's name, with its shape."""
    h, i = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "bert/embeddings/word_embeddings": (CONFIG["vocab_size"], h),
        "bert/embeddings/token_type_embeddings": (CONFIG["type_vocab_size"], h),
        "bert/embeddings/position_embeddings": (CONFIG["max_position_embeddings"], h),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h),
        "bert/pooler/dense/bias": (h,),
        "cls/predictions/transform/dense/kernel": (h, h),
        "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/transform/LayerNorm/gamma": (h,),
        "cls/predictions/transform/LayerNorm/beta": (h,),
        "cls/predictions/output_bias": (CONFIG["vocab_size"],),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    }
    for n in range(CONFIG["num_hidden_layers"]):
        layer = f"bert/encoder/layer_{n}"
        for part in ("query", "key", "value"):
            shapes[f"{layer}/attention/self/{part}/kernel"] = (h, h)
            shapes[f"{layer}/attention/self/{part}/bias"] = (h,)
        shapes[f"{layer}/attention/output/dense/kernel"] = (h, h)
        shapes[f"{layer}/attention/output/dense/bias"] = (h,)
        shapes[f"{layer}/attention/output/LayerNorm/gamma"] = (h,)
        shapes[f"{layer}/attention/output/LayerNorm/beta"] = (h,)
        shapes[f"{layer}/intermediate/dense/kernel"] = (h, i)
        shapes[f"{layer}/intermediate/dense/bias"] = (i,)
        shapes[f"{layer}/output/dense/kernel"] = (i, h)
        shapes[f"{layer}/output/dense/bias"] = (h,)
        shapes[f"{layer}/output/LayerNorm/gamma"] = (h,)
        shapes[f"{layer}/output/LayerNorm/beta"] = (h,)
    return shapes


def google_values() -> dict[str, np.ndarray]:
    """Deterministic float32 values, in name order; LayerNorm gains near 1 as trained ones are."""
    rng = np.random.default_rng(38)
    values = {}
    for name, shape in sorted(google_shapes().items()):
        value = rng.standard_normal(shape).astype(np.float32) * np.float32(0.5)
        if name.endswith("/gamma"):
            value = value * np.float32(0.2) + np.float32(1.0)
        values[name] = value
    return values


def hf_name(google: str) -> tuple[str, bool]:
    """transformers' name for a Google variable, and whether it is stored transposed: written
    out here independently of the reader under test (transformers' own
    load_tf_weights_in_bert rules)."""
    name = google.replace("bert/encoder/layer_", "bert/encoder/layer/")
    transpose = name.endswith("/kernel")
    if name == "cls/predictions/output_bias":
        return "cls.predictions.bias", False
    if name.startswith("cls/seq_relationship/"):
        return "cls.seq_relationship." + ("weight" if "weights" in name else "bias"), False
    parts = name.split("/")
    leaf = {"kernel": "weight", "gamma": "weight", "beta": "bias", "bias": "bias"}
    if parts[-1].endswith("_embeddings"):
        parts.append("weight")
    else:
        parts[-1] = leaf[parts[-1]]
    return ".".join(parts), transpose


def save(directory: Path, values: dict[str, np.ndarray], *, slots: bool, devices: int) -> None:
    """Google's way: graph-mode variables and a v1 Saver (format V2: .index + .data-*)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob(PREFIX + ".*"):
        old.unlink()
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for position, (name, value) in enumerate(values.items()):
            with tf.device(f"/cpu:{position % devices}"):
                variables.append(tf.compat.v1.get_variable(name, initializer=value))
                if slots:  # Adam's slots, as AdamWeightDecayOptimizer names them
                    for slot, scale in (("adam_m", 0.01), ("adam_v", 0.001)):
                        variables.append(
                            tf.compat.v1.get_variable(
                                f"{name}/{slot}", initializer=(value * np.float32(scale))
                            )
                        )
        if slots:
            variables.append(tf.compat.v1.train.get_or_create_global_step())
        saver = tf.compat.v1.train.Saver(variables, sharded=devices > 1)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": devices})
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            if slots:
                session.run(tf.compat.v1.train.get_global_step().assign(1000))
            saver.save(session, str(directory / PREFIX), write_meta_graph=False, write_state=False)


def write_config(directory: Path) -> None:
    text = json.dumps(CONFIG, indent=2) + "\n"
    (directory / "bert_config.json").write_text(text, encoding="utf-8")


def main() -> None:
    values = google_values()
    save(HERE, values, slots=True, devices=1)
    write_config(HERE)
    (HERE / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    expected = {}
    for name, value in values.items():
        hf, transpose = hf_name(name)
        expected[hf] = np.ascontiguousarray(value.T if transpose else value)
    save_file(dict(sorted(expected.items())), str(HERE / "expected.safetensors"))

    half = {"bert/embeddings/word_embeddings": values["bert/embeddings/word_embeddings"]}
    save(HERE / "float16", {k: v.astype(np.float16) for k, v in half.items()}, slots=False,
         devices=1)  # fmt: skip
    write_config(HERE / "float16")

    save(HERE / "sharded", values, slots=False, devices=2)
    write_config(HERE / "sharded")

    adapter = {"bert/encoder/layer_0/adapter/dense/kernel": np.eye(2, dtype=np.float32)}
    save(HERE / "unknown", adapter, slots=False, devices=1)
    write_config(HERE / "unknown")


def bert_base(directory: Path) -> None:
    CONFIG.update(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                  num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512)  # fmt: skip
    rng = np.random.default_rng(0)
    shapes = sorted(google_shapes().items())
    save(directory, {name: rng.standard_normal(shape, np.float32) for name, shape in shapes},
         slots=True, devices=1)  # fmt: skip
    write_config(directory)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bert-base", type=Path, help="write a BERT-base-shaped checkpoint here")
    arguments = parser.parse_args()
    tf.compat.v1.disable_eager_execution()
    if arguments.bert_base:
        bert_base(arguments.bert_base)
    else:
        main()
