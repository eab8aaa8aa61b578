"""`bertkit train --init-checkpoint DIR` with DIR a transformers BERT made here (random
weights, the sample's vocabulary, no download): the run's architecture is the directory's,
a 0-step run's export is the original bit for bit with its tokenizer files, the log names
the heads it lacks, what cannot work is refused in one line, and 2 processes start from it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file

from schemas.checkpoint import CheckpointKey
from tests.support.torchrun import torchrun_env, torchrun_trainer
from tests.test_inspect import inspect
from trainer import export, train
from trainer.hf_names import from_hf
from trainer.run.checkpoints import latest_checkpoint, model_from_checkpoint

SIZES = {
    "vocab_size": 8000,  # the sample's vocabulary
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 48,
    "max_position_embeddings": 160,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-7,
}
FLAGS = ["--micro-batch-size", "4", "--max-steps", "3", "--eval-batches", "1"]
FLAGS += ["--num-workers", "0", "--no-tensorboard", "--checkpoint-every", "1"]
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def released(
    tmp_path: Path,
    vocab: Path,
    cls: type = transformers.BertForPreTraining,
    name: str | None = None,
    dtype: torch.dtype = torch.float32,
    **config: object,
) -> Path:
    """A transformers BERT directory with the sample's vocabulary, as save_pretrained writes
    it (the tokenizer's too), vocab.txt the sample's own bytes; `config` over SIZES, the
    weights saved in `dtype`."""
    directory = tmp_path / (name or f"released-{cls.__name__}")
    torch.manual_seed(5)
    cls(transformers.BertConfig(**{**SIZES, **config})).to(dtype).save_pretrained(directory)
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(vocab / "vocab.txt"))
    tokenizer.save_pretrained(directory)
    shutil.copyfile(vocab / "vocab.txt", directory / "vocab.txt")
    return directory


def test_a_0_step_runs_export_is_the_original_bit_for_bit(
    sample_shards, sample_vocab, tmp_path, caplog, capsys
):
    original = released(tmp_path, sample_vocab)
    run = tmp_path / "run"
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(original)]
    with caplog.at_level("INFO", logger="bertkit.train"):
        assert train.run([*args, *FLAGS, "--output", str(run), "--stop-at-step", "0"]) == 0
    assert (
        f"--init-checkpoint: the released BERT at {original} (2 layers × 32, 2 heads, "
        "160 positions); every head from it" in caplog.text
    )
    checkpoint = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.STEP] == 0
    start = checkpoint[CheckpointKey.START]
    assert start["kind"] == "released" and start["path"] == "../../released-BertForPreTraining"
    # What save_pretrained wrote (transformers 5 keeps the special tokens in
    # tokenizer_config.json: no special_tokens_map.json).
    names = sorted(path.name for path in original.iterdir() if path.name in TOKENIZER_FILES)
    assert sorted(start["tokenizer_files"]) == names
    hf = tmp_path / "hf"
    assert export.run([str(run / "checkpoints"), "--output", str(hf)]) == 0
    ours, theirs = load_file(hf / "model.safetensors"), load_file(original / "model.safetensors")
    assert sorted(ours) == sorted(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in theirs)
    for name in names:
        assert (hf / name).read_bytes() == (original / name).read_bytes(), name
    config = json.loads((hf / "config.json").read_text())
    # Every field of the original's, and transformers' default position type said aloud.
    original_config = json.loads((original / "config.json").read_text())
    assert config == {**original_config, "position_embedding_type": "absolute"}
    # from_pretrained on the export works exactly as on the original.
    ids = torch.tensor([[2, 1037, 2003, 1996, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    with torch.no_grad():
        got = transformers.BertForPreTraining.from_pretrained(hf).eval()(ids, attention_mask=mask)
        want = transformers.BertForPreTraining.from_pretrained(original).eval()(
            ids, attention_mask=mask
        )
    assert torch.equal(got.prediction_logits, want.prediction_logits)
    text = "The cat sat on the mat."
    assert (
        transformers.AutoTokenizer.from_pretrained(hf)(text).input_ids
        == transformers.AutoTokenizer.from_pretrained(original)(text).input_ids
    )
    # inspect says what the run started from.
    code, lines, _ = inspect(capsys, str(run))
    digests = f"(config sha256 {start['config_sha256'][:16]}…, weights sha256 {start['weights_sha256'][:16]}…)"
    assert code == 0 and f"  started from the released BERT at {original} {digests}" in lines
    # --resume goes on from step 0 to --max-steps.
    assert train.run([*args, *FLAGS, "--output", str(run), "--resume"]) == 0
    last = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    assert last[CheckpointKey.STEP] == 3 and last[CheckpointKey.START] == start
    # A run started from that run's checkpoint keeps the record, its path from its own
    # checkpoints' directory, and exports the released model's tokenizer files too.
    phase2 = tmp_path / "later" / "phase2"
    flags = ["--init-checkpoint", str(run / "checkpoints"), "--max-steps", "1"]
    assert train.run([*args[:2], *FLAGS, *flags, "--output", str(phase2)]) == 0
    later = torch.load(latest_checkpoint(phase2 / "checkpoints"), weights_only=True)
    assert later[CheckpointKey.START] == {**start, "path": "../../../released-BertForPreTraining"}
    assert later[CheckpointKey.TRAIN_CONFIG]["model"] == "custom"  # --model left out
    capsys.readouterr()
    other = [*args[:2], *FLAGS, *flags, "--output", str(tmp_path / "p3"), "--model", "tiny"]
    assert train.run(other) == 2
    assert capsys.readouterr().err == (
        "bertkit train: error: the checkpoint holds a custom model, --model is tiny: leave "
        "--model out\n"
    )
    assert export.run([str(phase2 / "checkpoints"), "--output", str(tmp_path / "hf2")]) == 0
    for name in names:
        assert (tmp_path / "hf2" / name).read_bytes() == (original / name).read_bytes(), name


def test_heads_the_directory_lacks_are_named_and_mlm_drops_nsp(
    sample_shards, sample_vocab, tmp_path, caplog
):
    encoder = released(tmp_path, sample_vocab, transformers.BertModel)
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(encoder), *FLAGS]
    with caplog.at_level("INFO", logger="bertkit.train"):
        assert train.run([*args, "--output", str(tmp_path / "a"), "--max-steps", "1"]) == 0
    assert "; the MLM head and the NSP head start from the seed (it has none)" in caplog.text
    caplog.clear()
    # A BertForMaskedLM under the default objective: the line says its export's class.
    masked = released(tmp_path, sample_vocab, transformers.BertForMaskedLM)
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(masked), *FLAGS]
    with caplog.at_level("INFO", logger="bertkit.train"):
        assert train.run([*args, "--output", str(tmp_path / "m"), "--stop-at-step", "0"]) == 0
    assert (
        f"--init-checkpoint: the released BERT at {masked} (2 layers × 32, 2 heads, 160 "
        "positions); the pooler and the NSP head start from the seed (it has none): the export "
        "is a BertForPreTraining (--objective mlm leaves the pooler and NSP head out: a "
        "BertForMaskedLM)\n"
    ) in caplog.text
    caplog.clear()
    full = released(tmp_path, sample_vocab)
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(full), *FLAGS]
    with caplog.at_level("INFO", logger="bertkit.train"):
        code = train.run([*args, "--output", str(tmp_path / "b"), "--objective", "mlm"])
    assert code == 0
    assert "; the pooler and the NSP head dropped (--objective mlm)" in caplog.text
    model = torch.load(latest_checkpoint(tmp_path / "b" / "checkpoints"), weights_only=True)
    assert model[CheckpointKey.MODEL_CONFIG]["objective"] == "mlm"
    assert "nsp.weight" not in model[CheckpointKey.MODEL]


def test_a_half_precision_release_exports_float32_with_its_own_dropout(
    sample_shards, sample_vocab, tmp_path
):
    """An fp16 original's config.json says "float16": the export's weights are float32, and
    its config.json says so (else transformers loads them half). Trained with --dropout 0, it
    keeps the original's rates: fine-tuning it later drops out as the original did."""
    rates = {"hidden_dropout_prob": 0.15, "attention_probs_dropout_prob": 0.05}
    original = released(tmp_path, sample_vocab, dtype=torch.float16, **rates)
    assert json.loads((original / "config.json").read_text())["dtype"] == "float16"
    run, hf = tmp_path / "run", tmp_path / "hf"
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(original), *FLAGS]
    assert train.run([*args, "--output", str(run), "--max-steps", "2", "--dropout", "0"]) == 0
    checkpoint = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    trained = checkpoint[CheckpointKey.MODEL_CONFIG]
    assert (trained["hidden_dropout_prob"], trained["attention_probs_dropout_prob"]) == (0, 0)
    assert export.run([str(run), "--output", str(hf)]) == 0
    config = json.loads((hf / "config.json").read_text())
    original_config = json.loads((original / "config.json").read_text())
    assert config == {**original_config, "dtype": "float32", "position_embedding_type": "absolute"}
    model = transformers.BertForPreTraining.from_pretrained(hf).eval()
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}
    ours = model_from_checkpoint(checkpoint, "run")
    ids = torch.tensor([[2, 1037, 2003, 3, 1996, 4937, 3, 0], [2, 1996, 3, 2003, 3, 0, 0, 0]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        mlm, nsp = ours.prediction_scores(ids, types, mask.bool())
        got = model(ids, token_type_ids=types, attention_mask=mask)
    real = mask.bool()
    torch.testing.assert_close(got.prediction_logits[real], mlm[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(got.seq_relationship_logits, nsp, atol=1e-5, rtol=0)


def test_refusals_before_any_work(sample_shards, sample_vocab, tmp_path, capsys):
    original = released(tmp_path, sample_vocab)
    capsys.readouterr()  # save_pretrained's progress bar
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(original), *FLAGS]
    assert train.run([*args, "--output", str(tmp_path / "a"), "--model", "tiny"]) == 2
    error = capsys.readouterr().err
    assert error.strip().splitlines() == [
        f"bertkit train: error: --model tiny: the released BERT at {original} is 2 layers × "
        "32 (2 heads, intermediate 48), no preset; leave --model out"
    ]
    # A cased tokenizer over the uncased shards' vocabulary: its export would cut text apart.
    config_file = original / "tokenizer_config.json"
    saved = config_file.read_text()
    config_file.write_text(json.dumps({**json.loads(saved), "do_lower_case": False}))
    assert train.run([*args, "--output", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"bertkit train: error: {original} is cased (its tokenizer_config.json do_lower_case), "
        "the shards were made uncased (their manifest): its tokenizer, which an export ships, "
        "does not cut text as the shards were cut; make the shards with `bertkit examples "
        f"--vocab {original}`, which takes its casing"
    ]
    config_file.write_text(saved)
    (original / "vocab.txt").write_bytes(
        (original / "vocab.txt").read_bytes().replace(b"\nthe\n", b"\nthee\n", 1)
    )
    assert train.run([*args, "--output", str(tmp_path / "b")]) == 2
    error = capsys.readouterr().err
    assert f"{original}/vocab.txt differs from the shards' vocabulary at id " in error
    assert "the model's token is 'thee', the shards' 'the'" in error
    assert not (tmp_path / "a" / "checkpoints").exists()


# slow: torchrun and two trainers; the start itself is checked above in process.
@pytest.mark.slow
def test_two_processes_start_from_a_released_model(sample_shards, sample_vocab, tmp_path):
    original = released(tmp_path, sample_vocab)
    run = tmp_path / "run"
    args = ["--shards", str(sample_shards), "--init-checkpoint", str(original), *FLAGS]
    args += ["--max-steps", "2", "--micro-batch-size", "2", "--lr", "1e-4"]
    command = [*torchrun_trainer(2), *args, "--output", str(run)]
    done = subprocess.run(command, env=torchrun_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--init-checkpoint: the released BERT at" in done.stderr
    assert done.stderr.count("--init-checkpoint: the released BERT at") == 1  # rank 0 says it
    checkpoint = torch.load(latest_checkpoint(run / "checkpoints"), weights_only=True)
    assert (checkpoint[CheckpointKey.STEP], checkpoint[CheckpointKey.WORLD_SIZE]) == (2, 2)
    assert checkpoint[CheckpointKey.START]["path"] == "../../released-BertForPreTraining"
    # Started from the directory's weights: AdamW moves a weight by at most about the
    # learning rate a step (no warmup under 10 steps), where a fresh draw is ~0.02 away.
    start = from_hf(load_file(original / "model.safetensors"), 2)
    moved = max(
        (tensor - start[name]).abs().max().item()
        for name, tensor in checkpoint[CheckpointKey.MODEL].items()
    )
    assert 0 < moved <= 2 * 1e-4 * 1.01
