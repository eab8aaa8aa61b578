"""`bertkit inspect` on a vocabulary directory and on a training run's checkpoints (a run
directory, its checkpoints/ directory, `latest`, one checkpoint): what they hold, in exact
lines; and one plain line for what it does not read."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from pipelines.io.vocabulary import build_tokenizer
from schemas.vocab import (
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    VOCAB_FILE,
    VOCAB_METADATA_FILE,
    VocabMetadata,
)
from tests.support.s3server import client_environment
from tests.test_inspect import VOCAB, inspect
from tests.test_train import run_train

# --------------------------------------------------------------------------- a vocabulary

TINY_VOCAB = [*VOCAB, "##s", "##ed", "[unused0]"]  # 16 tokens: 5 special, 1 unused


def write_tiny_vocabulary(directory: Path) -> tuple[str, str]:
    """A `bertkit vocab` directory of TINY_VOCAB, laid out as the stage writes it; returns
    the sha256 of vocab.txt and tokenizer.json."""
    directory.mkdir(parents=True)
    vocab_bytes = "".join(f"{token}\n" for token in TINY_VOCAB).encode()
    tokenizer_bytes = build_tokenizer(TINY_VOCAB, cased=False).to_str(pretty=True).encode()
    (directory / VOCAB_FILE).write_bytes(vocab_bytes)
    (directory / TOKENIZER_FILE).write_bytes(tokenizer_bytes)
    digests = hashlib.sha256(vocab_bytes).hexdigest(), hashlib.sha256(tokenizer_bytes).hexdigest()
    metadata = VocabMetadata(
        vocab_size=len(TINY_VOCAB),
        cased=False,
        num_unused=1,
        special_tokens={token: TINY_VOCAB.index(token) for token in SPECIAL_TOKENS},
        sample={
            "documents": 3,
            "sentences": 7,
            "text_bytes": 120,
            "total_text_bytes": 150,
            "seed": 0,
            "alphabet": 9,
            "learned_tokens": 1,
        },
        inputs=[
            {
                "path": "../documents/books",
                "stage": "books",
                "documents": 3,
                "text_bytes": 150,
                "manifest_sha256": "ab" * 32,
            }
        ],
        config={"vocab_size": 16, "cased": False},
        vocab_sha256=digests[0],
        tokenizer_sha256=digests[1],
    )
    (directory / VOCAB_METADATA_FILE).write_text(metadata.to_json())
    return digests


def test_a_vocabulary_directory_shows_what_it_holds(tmp_path: Path, capsys) -> None:
    vocab_dir = tmp_path / "vocab"
    vocab_sha, tokenizer_sha = write_tiny_vocabulary(vocab_dir)
    # Its input, recorded relative to the vocabulary: shown where it is now.
    (tmp_path / "documents" / "books").mkdir(parents=True)
    (tmp_path / "documents" / "books" / "_manifest.json").write_text("{}")
    expected = [
        f"vocabulary {vocab_dir} (vocab.json)",
        "record Vocabulary, schema version 1.0, written by bertkit 0.1.0",
        "size: 16 tokens (5 special, 9 characters, 1 learned, 1 [unusedN])",
        "casing: uncased (lower-cased, accents stripped, as BERT uncased)",
        f"vocab.txt sha256: {vocab_sha}",
        f"tokenizer.json sha256: {tokenizer_sha}",
        "special tokens: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4",
        "sample tokens (id:token): 5:the 6:cat 7:sat 8:on 9:mat 10:dog 11:ran 12:. 13:##s 14:##ed",
        "word pieces: 8 word starts, 2 ## continuations",
        "trained on: 3 documents, 7 sentences, 120 bytes of text (of 150), seed 0",
        "inputs: 1",
        f"  {tmp_path / 'documents' / 'books'} (books): 3 documents, 150 bytes of text, "
        "manifest sha256 abababababababab…",
        "checked: vocab.txt and tokenizer.json have the sha256 vocab.json records and list the "
        "same tokens",
    ]
    for target in (vocab_dir, vocab_dir / VOCAB_METADATA_FILE, vocab_dir / VOCAB_FILE):
        code, lines, err = inspect(capsys, str(target))
        assert (code, err) == (0, "")
        assert lines == expected
    (tmp_path / "documents" / "books" / "_manifest.json").unlink()
    code, lines, _ = inspect(capsys, str(vocab_dir))
    assert lines[11] == (
        "  ../documents/books (not there now) (books): 3 documents, 150 bytes of text, "
        "manifest sha256 abababababababab…"
    )


def test_the_sample_vocabulary(sample_vocab: Path, capsys) -> None:
    code, lines, err = inspect(capsys, str(sample_vocab))
    assert (code, err) == (0, "")
    assert lines[2:9] == [
        "size: 8,000 tokens (5 special, 343 characters, 228 ##characters, 7,424 learned, 0 [unusedN])",
        "casing: uncased (lower-cased, accents stripped, as BERT uncased)",
        "vocab.txt sha256: 0083f89ee4b94df683c4b9a059a09352cac1fabfdbfd022db5a985274f590da0",
        "tokenizer.json sha256: 3095cbe4935b5b622b5590c133787f95292699e348f2725628d0bf506387698a",
        "special tokens: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4",
        "sample tokens (id:token): 5:! 893:##reat 1781:dra 2669:nation 3557:##asi "
        "4446:shad 5334:mortal 6222:administrative 7110:albanians 7999:enorm",
        "word pieces: 6,059 word starts, 1,936 ## continuations",
    ]
    assert lines[9] == (
        "trained on: 101 documents, 24,233 sentences, 3,580,477 bytes of text (of 3,580,477), "
        "seed 0"
    )
    assert lines[10] == "inputs: 2"


def test_a_plain_google_vocab_txt_says_what_it_cannot_know(tmp_path: Path, capsys) -> None:
    (tmp_path / VOCAB_FILE).write_text("".join(f"{token}\n" for token in VOCAB))
    code, lines, err = inspect(capsys, str(tmp_path / VOCAB_FILE))
    assert (code, err) == (0, "")
    sha = hashlib.sha256((tmp_path / VOCAB_FILE).read_bytes()).hexdigest()
    assert lines == [
        f"vocabulary {tmp_path} (a released BERT's: vocab.txt)",
        "size: 13 tokens (0 [unusedN])",
        "casing: not said by the directory (no do_lower_case in tokenizer_config.json, no "
        "tokenizer.json normalizer): `bertkit examples` needs --cased or --no-cased",
        f"vocab.txt sha256: {sha}",
        "special tokens: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4",
        "sample tokens (id:token): 5:the 6:cat 7:sat 8:on 9:mat 10:dog 11:ran 12:.",
        "word pieces: 8 word starts, 0 ## continuations",
        "checked: vocab.txt has no empty line, no token twice and BERT's special tokens",
    ]


def test_a_changed_vocab_txt_is_one_line(tmp_path: Path, capsys) -> None:
    vocab_dir = tmp_path / "vocab"
    write_tiny_vocabulary(vocab_dir)
    with (vocab_dir / VOCAB_FILE).open("a") as file:
        file.write("extra\n")
    code, lines, err = inspect(capsys, str(vocab_dir))
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: {vocab_dir / VOCAB_FILE} was modified after training: its "
        "sha256 differs from the one in vocab.json; restore it or rerun `bertkit vocab`\n"
    )


def test_flags_for_shards_are_refused_before_anything_is_read(tmp_path: Path, capsys) -> None:
    vocab_dir = tmp_path / "vocab"
    write_tiny_vocabulary(vocab_dir)
    code, lines, err = inspect(capsys, str(vocab_dir), "--show", "2", "--split", "train")
    assert (code, lines) == (2, [])
    assert err == (
        f"bertkit inspect: error: {vocab_dir} is a vocabulary directory: inspect prints its "
        "summary, and --show, --split apply to shards and documents; run it without them\n"
    )


# --------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def tiny_run(sample_shards: Path, tmp_path_factory) -> Path:
    """A tiny BERT trained 3 steps on the real sample, a checkpoint at steps 2 and 3."""
    run_dir = tmp_path_factory.mktemp("inspect-run") / "run"
    code = run_train(
        *("--shards", str(sample_shards), "--output", str(run_dir), "--max-steps", "3"),
        *("--warmup-steps", "1", "--num-workers", "0", "--eval-every", "0"),
        *("--checkpoint-every", "2", "--keep-checkpoints", "3"),
    )
    assert code == 0
    return run_dir


def checkpoint_lines(
    run_dir: Path, step: int, latest: bool, vocab: Path, shards: Path
) -> list[str]:
    """What inspect prints of the checkpoint at `step` of `tiny_run`."""
    path = run_dir / "checkpoints" / f"step-{step:08d}.pt"
    data = torch.load(path, weights_only=True, mmap=True)["data"]
    return [
        f"step-{step:08d}.pt{' (latest)' if latest else ''}:",
        f"  step {step} of --max-steps 3",
        "  model: tiny, 2 layers × 128 hidden, 2 heads, 512 intermediate, 8,000 token ids, 512 "
        "positions, 1,528,130 parameters",
        "  recipe: mlm+nsp, static masking (the masks stored in the shards)",
        "  optimizer: adamw, lr 0.002, weight decay 0.01, betas 0.9/0.999, eps 1e-06, clip "
        f"grad norm 1.0; lr now {0.002 * (3 - step) / 2:.6g}",
        "  schedule: linear warmup over 1 step to lr 0.002, then linear decay to 0 at step 3",
        "  batch: 16 sequences a step (micro-batch 16 × 1 process × 1 accumulated); world size "
        "1, 0 loader workers a process",
        f"  data position: epoch 0, {step} global batches consumed in it ({16 * step} of "
        "15,521 samples)",
        f"  shards: {shards / 'manifest.json'} (seq128, schema 2.1, 8 shards, digest "
        f"{data['shards_sha256'][:16]}…)",
        f"  vocabulary: {vocab} (8,000 tokens, uncased, sha256 0083f89ee4b94df6…)",
        "  seed 12345, precision auto, device auto",
    ]


def test_a_run_directory_shows_its_checkpoints_and_the_latest(
    tiny_run: Path, sample_vocab: Path, sample_shards: Path, capsys
) -> None:
    checkpoints = tiny_run / "checkpoints"
    sizes = {step: (checkpoints / f"step-{step:08d}.pt").stat().st_size for step in (2, 3)}
    steps = [
        f"checkpoints {checkpoints}: 2 checkpoints",
        f"  step-00000002.pt  {sizes[2]:,} bytes",
        f"  step-00000003.pt  {sizes[3]:,} bytes  (latest)",
    ]
    code, lines, err = inspect(capsys, str(tiny_run))
    assert (code, err) == (0, "")
    assert lines == [
        f"run directory {tiny_run}: checkpoints/, metrics.jsonl",
        *steps,
        *checkpoint_lines(tiny_run, 3, True, sample_vocab, sample_shards),
    ]
    # checkpoints/ and its `latest` file show the same, as one checkpoint does.
    for target in (checkpoints, checkpoints / "latest", checkpoints / "step-00000003.pt"):
        assert inspect(capsys, str(target)) == (0, lines, "")
    code, lines, err = inspect(capsys, str(checkpoints / "step-00000002.pt"))
    assert (code, err) == (0, "")
    assert lines[4:] == checkpoint_lines(tiny_run, 2, False, sample_vocab, sample_shards)


def test_without_torch_a_checkpoint_is_one_line_naming_the_install(
    tiny_run: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # as in the core install
    code, lines, err = inspect(capsys, str(tiny_run))
    assert (code, lines) == (2, [])
    assert err == (
        "bertkit inspect: error: reading a checkpoint needs torch, which the core install "
        "leaves out: pip install 'bertkit[train]' (or pip install torch)\n"
    )


def test_a_damaged_checkpoint_or_none_yet_is_one_line(tmp_path: Path, capsys) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (tmp_path / "run" / "metrics.jsonl").write_text("")
    code, lines, err = inspect(capsys, str(tmp_path / "run"))
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: {tmp_path / 'run'} holds no checkpoint yet (no "
        "step-NNNNNNNN.pt): the run stopped before its first; --checkpoint-every sets when it "
        "writes one\n"
    )
    code, lines, err = inspect(capsys, str(checkpoints))  # its empty checkpoints/ alike
    assert (code, lines) == (1, [])
    assert err.startswith(f"bertkit inspect: error: {tmp_path / 'run'} holds no checkpoint yet")
    (checkpoints / "step-00000001.pt").write_bytes(b"not a checkpoint")
    (checkpoints / "latest").write_text("step-00000001.pt\n")
    code, lines, err = inspect(capsys, str(checkpoints / "step-00000001.pt"))
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith(
        f"bertkit inspect: error: {checkpoints / 'step-00000001.pt'} is not a readable bertkit "
        "checkpoint (torch.load(weights_only=True): RuntimeError: "
    )
    assert err.endswith("; it was cut short or written by another tool\n")
    # A file holding what weights_only refuses (code to run, here a date): one line, and
    # never torch's advice to load it another way.
    import datetime

    torch.save({"when": datetime.date(2020, 1, 2)}, checkpoints / "step-00000001.pt")
    code, _, err = inspect(capsys, str(checkpoints / "step-00000001.pt"))
    assert (code, err) == (
        1,
        f"bertkit inspect: error: {checkpoints / 'step-00000001.pt'} is not a bertkit "
        "checkpoint: it holds objects other than tensors and plain containers "
        "(datetime.date), so it is refused, never unpickled\n",
    )
    torch.save({"format": "other"}, checkpoints / "step-00000001.pt")
    code, _, err = inspect(capsys, str(checkpoints))
    assert code == 1 and err.endswith(
        "step-00000001.pt is format 'other', not a 'bertkit-checkpoint-1' checkpoint: it was "
        "not written by this bertkit's trainer\n"
    )
    (checkpoints / "latest").write_text("../../etc/passwd\n")
    code, _, err = inspect(capsys, str(checkpoints))
    assert code == 1 and err == (
        f"bertkit inspect: error: {checkpoints / 'latest'} holds '../../etc/passwd', not the "
        "name of a checkpoint beside it (step-NNNNNNNN.pt); it was changed after the trainer "
        "wrote it: inspect one checkpoint file (step-NNNNNNNN.pt) instead\n"
    )


# --------------------------------------------------------------------------- what it cannot


def test_what_inspect_does_not_read_is_one_plain_line(tmp_path: Path, capsys) -> None:
    hf = tmp_path / "out" / "hf"
    hf.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (hf / name).write_text("{}")
    code, lines, err = inspect(capsys, str(hf))
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: {hf} is a transformers model directory (what `bertkit "
        "export-hf` writes), which inspect does not read: load it with transformers "
        f"(BertForPreTraining.from_pretrained('{hf}')), or inspect the run's checkpoints\n"
    )
    write_tiny_vocabulary(tmp_path / "out" / "vocab")
    # With its tokenizer files (a released BERT, or export-hf's output): its vocabulary.
    for name in (VOCAB_FILE, TOKENIZER_FILE):
        shutil.copyfile(tmp_path / "out" / "vocab" / name, hf / name)
    code, lines, err = inspect(capsys, str(hf))
    assert (code, err) == (0, "")
    assert lines[0] == f"vocabulary {hf} (a released BERT's: {VOCAB_FILE}, {TOKENIZER_FILE})"
    assert (
        "model: config.json, model.safetensors beside it, a transformers model (a released "
        "BERT, or what `bertkit export-hf` writes): inspect shows its vocabulary; load the "
        "model with transformers"
    ) in lines
    for name in (VOCAB_FILE, TOKENIZER_FILE):
        (hf / name).unlink()
    (tmp_path / "out" / "documents" / "books").mkdir(parents=True)
    (tmp_path / "out" / "documents" / "books" / "_manifest.json").write_text(json.dumps({}))
    (tmp_path / "out" / "run" / "checkpoints").mkdir(parents=True)
    out = tmp_path / "out"
    code, lines, err = inspect(capsys, str(out))
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: {out} is a folder of artifacts, not one itself: inspect one "
        f"of {out / 'documents/books'}, {out / 'run'}, {out / 'vocab'}\n"
    )


def test_a_copied_run_shows_the_copies_it_links_to(
    tiny_run: Path, sample_vocab: Path, sample_shards: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """The run, its shards and vocabulary copied elsewhere (their relative places kept) and
    read from a third directory: the checkpoint's links lead to the copies, not to the
    originals (which are still there)."""
    copy = tmp_path / "copy"
    for original in (tiny_run.parent, sample_shards.parent, sample_vocab.parent):
        shutil.copytree(original, copy / original.name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run = copy / tiny_run.parent.name / tiny_run.name
    code, lines, err = inspect(capsys, str(run))
    assert (code, err) == (0, "")
    shards = copy / sample_shards.parent.name / sample_shards.name
    vocab = copy / sample_vocab.parent.name / sample_vocab.name
    assert lines[4:] == checkpoint_lines(run, 3, True, vocab, shards)


# --------------------------------------------------------------------------- on object storage


def test_a_vocabulary_on_s3_is_shown_and_a_run_there_named(
    s3_server, tmp_path: Path, monkeypatch, capsys
) -> None:
    bucket = s3_server.bucket("inspect-artifacts")
    for name, value in {
        **client_environment(s3_server.endpoint),
        "NO_PROXY": "127.0.0.1,localhost",
    }.items():
        monkeypatch.setenv(name, value)
    vocab_sha, _ = write_tiny_vocabulary(tmp_path / "vocab")
    for path in (tmp_path / "vocab").iterdir():
        s3_server.client.upload_file(str(path), bucket, f"vocab/{path.name}")
    s3_server.client.put_object(
        Bucket=bucket, Key="run/checkpoints/latest", Body=b"step-00000002.pt\n"
    )
    code, lines, err = inspect(capsys, f"s3://{bucket}/vocab")
    assert (code, err) == (0, "")
    assert lines[0] == f"vocabulary s3://{bucket}/vocab (vocab.json)"
    assert lines[4] == f"vocab.txt sha256: {vocab_sha}"
    code, lines, err = inspect(capsys, f"s3://{bucket}/run")
    assert (code, lines) == (1, [])
    assert err == (
        f"bertkit inspect: error: s3://{bucket}/run holds a training run's checkpoints; inspect "
        "reads them on a local or mounted path: copy the run directory (or its "
        "checkpoints/latest and the checkpoint it names) down and inspect the copy\n"
    )


def test_a_mixed_run_s_checkpoint_names_every_source_and_its_share(tmp_path: Path) -> None:
    from pipelines.inspect.checkpoints import _shards_line

    def source(name: str, weight: float, shards: int, digest: str) -> dict:
        return {
            "name": name,
            "weight": weight,
            "manifest": f"https://host/{name}/manifest.json",
            "schema_version": "2.1",
            "max_seq_length": 128,
            "shards": shards,
            "shards_sha256": digest * 64,
        }

    data = {"mix": "0.7,0.3", "sources": [source("law", 0.7, 1, "a"), source("wiki", 0.3, 2, "b")]}
    assert _shards_line({}, data, tmp_path).split("\n") == [
        "shards: a mix of 2 sources, --mix 0.7,0.3",
        "    law (0.7): https://host/law/manifest.json (seq128, schema 2.1, 1 shard, digest aaaaaaaaaaaaaaaa…)",
        "    wiki (0.3): https://host/wiki/manifest.json (seq128, schema 2.1, 2 shards, digest bbbbbbbbbbbbbbbb…)",
    ]


def test_a_dynamic_recipe_names_its_shares_in_the_order_the_trainer_reads_them() -> None:
    """--mask-replace is [MASK]/kept/random (trainer --help): 70/20/10 keeps 20 %."""
    from pipelines.inspect.checkpoints import _recipe_line

    config = {"mask_rate": 0.3, "mask_replace": "70/20/10", "whole_word_mask": True}
    line = _recipe_line(config, {"objective": "mlm"}, {"masking": "dynamic"})
    assert line == (
        "recipe: mlm, dynamic masking (rate 0.3, 70/20/10 [MASK]/kept/random, whole words, "
        "at most the default a sequence)"
    )
