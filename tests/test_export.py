"""`bertkit export-hf`: a checkpoint → a directory HF's BertForPreTraining and AutoTokenizer load,
giving our logits and our token ids; wrong vocabularies and non-checkpoints are refused."""

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import transformers
from safetensors import safe_open

from bertkit import cli
from pipelines.io.vocabulary import load_vocab
from schemas.checkpoint import CHECKPOINT_FORMAT, LATEST_FILE, CheckpointKey, checkpoint_name
from trainer.export import ExportError, export_hf
from trainer.model import BertForPreTraining, config_for, parameter_count
from trainer.run.checkpoints import CheckpointError

STEP = 1000


def write_checkpoint(directory: Path, vocab_dir: Path, sha256: str | None = None) -> Path:
    """A checkpoint as the trainer writes it (schemas/checkpoint.py), with its `latest` file."""
    vocab = load_vocab(str(vocab_dir))
    torch.manual_seed(0)
    model = BertForPreTraining(config_for("tiny", vocab.size, max_position_embeddings=64))
    # Every weight moved by N(0, 0.1): LayerNorms and biases that are not (1, 0), and
    # activations of order 1, where erf and tanh GELU differ by ~1e-3 (at init, by ~1e-6).
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    directory.mkdir(parents=True)
    path = directory / checkpoint_name(STEP)
    torch.save(
        {
            CheckpointKey.FORMAT: CHECKPOINT_FORMAT,
            CheckpointKey.STEP: STEP,
            CheckpointKey.MODEL_CONFIG: asdict(model.config),
            CheckpointKey.MODEL: model.state_dict(),
            CheckpointKey.VOCAB: {
                "path": str(vocab_dir),
                "sha256": sha256 or vocab.sha256,
                "size": vocab.size,
                "cased": vocab.cased,
            },
        },
        path,
    )
    (directory / LATEST_FILE).write_text(path.name + "\n")
    return path


@pytest.fixture(scope="module")
def exported(sample_vocab, tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint file, HF directory exported from it)."""
    root = tmp_path_factory.mktemp("export")
    checkpoint = write_checkpoint(root / "checkpoints", sample_vocab)
    output = root / "hf"
    written = export_hf(checkpoint, output)
    assert [Path(p).name for p in written] == [
        "model.safetensors",
        "vocab.txt",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "config.json",
    ]
    return checkpoint, output


def our_model(checkpoint: Path) -> BertForPreTraining:
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    model = BertForPreTraining(
        config_for("tiny", saved["model_config"]["vocab_size"], max_position_embeddings=64)
    )
    model.load_state_dict(saved["model"])
    return model.eval()


def test_hf_model_gives_our_logits(exported):
    checkpoint, output = exported
    ours = our_model(checkpoint)
    hf, info = transformers.BertForPreTraining.from_pretrained(output, output_loading_info=True)
    hf.eval()
    assert not info["missing_keys"]
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    assert hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight
    assert sum(p.numel() for p in hf.parameters()) == parameter_count(ours)

    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, ours.config.vocab_size, (2, 24), generator=generator)
    input_ids[:, 0] = 2
    attention_mask = torch.ones(2, 24, dtype=torch.bool)
    attention_mask[1, 15:] = False  # row 1: 15 tokens, then [PAD]
    input_ids[1, 15:] = 0
    token_type_ids = torch.zeros(2, 24, dtype=torch.long)
    token_type_ids[:, 9:15] = 1
    with torch.no_grad():
        mlm, nsp = ours.prediction_scores(input_ids, token_type_ids, attention_mask)
        out = hf(
            input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask.long()
        )
    torch.testing.assert_close(out.seq_relationship_logits, nsp, atol=1e-4, rtol=0)
    torch.testing.assert_close(out.prediction_logits[0], mlm[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(out.prediction_logits[1, :15], mlm[1, :15], atol=1e-4, rtol=0)
    assert nsp.abs().max() > 1e-2 and mlm.std() > 1e-2  # not trivially equal


def test_exported_files(exported, sample_vocab):
    _, output = exported
    config = json.loads((output / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["model_type"] == "bert"
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (
        128,
        2,
        512,
    )
    assert config["hidden_act"] == "gelu" and config["max_position_embeddings"] == 64
    with safe_open(output / "model.safetensors", framework="pt") as weights:
        # transformers writes {"format": "pt"}; the mark tells an earlier export (--overwrite)
        assert weights.metadata() == {"format": "pt", "bertkit": "export-hf"}
        assert "cls.predictions.decoder.weight" not in weights.keys()  # noqa: SIM118
    assert (output / "vocab.txt").read_bytes() == (sample_vocab / "vocab.txt").read_bytes()
    assert (output / "tokenizer.json").read_bytes() == (
        sample_vocab / "tokenizer.json"
    ).read_bytes()
    tokenizer_config = json.loads((output / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is True and tokenizer_config["model_max_length"] == 64


def test_hf_tokenizer_gives_our_ids(exported, sample_vocab):
    _, output = exported
    ours = load_vocab(str(sample_vocab)).tokenizer
    hf = transformers.AutoTokenizer.from_pretrained(output)
    expected = ours.encode("The cat sat.").ids
    assert expected[0] == 2 and len(expected) == 6  # [CLS] the cat sat . [SEP]
    assert hf("The cat sat.")["input_ids"] == expected
    pair = ours.encode("The cat sat.", "Naïve Cafés!")
    encoded = hf("The cat sat.", "Naïve Cafés!")
    assert encoded["input_ids"] == pair.ids
    assert encoded["token_type_ids"] == pair.type_ids
    assert hf.pad_token_id == 0 and hf.mask_token == "[MASK]"


def test_refuses_a_vocabulary_with_another_sha256(sample_vocab, tmp_path, capsys):
    wrong = "ab" * 32
    checkpoint = write_checkpoint(tmp_path / "checkpoints", sample_vocab, sha256=wrong)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(checkpoint), "--output", str(tmp_path / "hf")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    right = load_vocab(str(sample_vocab)).sha256
    assert wrong in error and right in error and "--vocab" in error
    assert not (tmp_path / "hf").exists()


def test_refuses_files_that_are_not_checkpoints(tmp_path):
    text = tmp_path / "notes.pt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(CheckpointError, match=r"notes\.pt is not a bertkit checkpoint"):
        export_hf(text, tmp_path / "hf")
    other = tmp_path / "weights.pt"
    torch.save({"model": {}}, other)
    with pytest.raises(CheckpointError, match="not a 'bertkit-checkpoint-1' checkpoint"):
        export_hf(other, tmp_path / "hf")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="without a `latest` file"):
        export_hf(tmp_path / "empty", tmp_path / "hf")


def test_cli_reads_latest_refuses_nonempty_output_and_takes_vocab(
    exported, sample_vocab, tmp_path, capsys
):
    checkpoint, _ = exported
    output = tmp_path / "hf"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(checkpoint.parent), "--output", str(output)])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert str(output / "model.safetensors") in printed
    assert f"{parameter_count(our_model(checkpoint)):,} parameters" in printed
    assert f"{output}: HF BertForPreTraining, 2 layers × 128" in printed  # config.json's class

    # The run directory (checkpoints/ is inside it) stands for its checkpoints' `latest`.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(checkpoint.parent.parent), "--output", str(tmp_path / "run")])
    assert exit_info.value.code == 0
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "run" / name).read_bytes() == (output / name).read_bytes()
    capsys.readouterr()

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(checkpoint.parent), "--output", str(output)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "is not empty" in error and "--overwrite" in error

    # A directory holding what no export writes (here a vocabulary directory) is never
    # written into, even with --overwrite; its files stay as they were.
    with pytest.raises(ExportError, match=r"holds vocab\.json, which `bertkit export-hf` does not"):
        export_hf(checkpoint, sample_vocab, overwrite=True)
    assert (sample_vocab / "vocab.json").is_file()

    # The recorded vocabulary moved: refused with a hint, then found through --vocab.
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    saved["vocab"]["path"] = str(tmp_path / "moved-vocab")
    moved = tmp_path / "moved.pt"
    torch.save(saved, moved)
    with pytest.raises(ExportError, match="if it moved, pass --vocab DIR"):
        export_hf(moved, output, overwrite=True)
    export_hf(moved, output, vocab_dir=str(sample_vocab), overwrite=True)
    assert (output / "config.json").is_file()


def test_config_json_says_float32_and_which_dropout():
    """config.json describes the file: float32 weights, whatever the original's dtype (an fp16
    original's "float16" loaded the export half). A bertkit model's rates are those it trained
    with; a released model's run keeps the original's (or transformers' default, unsaid)."""
    from trainer.export import hf_config
    from trainer.model import BertConfig

    config = BertConfig(
        vocab_size=9,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=12,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    fields = {
        "architectures": ["BertForPreTraining"],
        "model_type": "bert",
        "hidden_act": "gelu",
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "vocab_size": 9,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "max_position_embeddings": 12,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "initializer_range": 0.02,
        "pad_token_id": 0,
    }
    rates = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    assert hf_config(config) == {**fields, **rates, "dtype": "float32"}
    original = {"dtype": "float16", "torch_dtype": "float16", "hidden_dropout_prob": 0.15}
    assert hf_config(config, {**original, "classifier_dropout": None}) == {
        **fields,
        "dtype": "float32",
        "torch_dtype": "float32",
        "hidden_dropout_prob": 0.15,  # and no attention rate: transformers' default, as it had
        "classifier_dropout": None,
    }


def test_a_checkpoint_holding_other_objects_is_refused_never_unpickled(tmp_path, capsys):
    """torch's text advised loading it with weights_only=False: never said."""
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "step-00000001.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "extra": Payload()}, path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", str(path), "--output", str(tmp_path / "hf")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"bertkit export-hf: error: {path} is not a bertkit checkpoint: it holds objects other "
        f"than tensors and plain containers ({os.system.__module__}.system), so it is refused, "
        "never unpickled; pass a step-NNNNNNNN.pt file written by the trainer\n"
    )
    assert not marker.exists()


def test_the_released_tokenizer_files_are_read_where_recorded_or_from_vocab(tmp_path):
    import hashlib

    from trainer.export import released_tokenizer_files

    data = b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    sha256 = hashlib.sha256(data).hexdigest()
    record = {
        "path": "../bert",
        "config_file": "config.json",
        "tokenizer_files": {"vocab.txt": sha256},
    }
    checkpoints, moved = tmp_path / "run" / "checkpoints", tmp_path / "moved"
    checkpoints.mkdir(parents=True)
    moved.mkdir()
    recorded = tmp_path / "run" / "bert" / "vocab.txt"
    with pytest.raises(ExportError) as caught:
        released_tokenizer_files(record, str(checkpoints), str(moved))
    assert str(caught.value) == (
        f"cannot read {recorded} (No such file or directory) nor {moved / 'vocab.txt'} (No such "
        "file or directory), a file of the released model the run started from: where the "
        "model moved, pass as --vocab DIR the released model's directory, as released; or put "
        "it back where the run found it"
    )
    (moved / "vocab.txt").write_bytes(data)
    assert released_tokenizer_files(record, str(checkpoints), str(moved)) == {"vocab.txt": data}
