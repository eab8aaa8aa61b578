"""`bertkit export-hf --overwrite` replaces an earlier export and nothing else: no file of
the earlier one survives (a tokenizer.json beside another vocabulary would be what
transformers reads), locally and on s3:// (moto); a directory of transformers files that
no export wrote, and the released model the run started from, are refused and untouched;
an export by a bertkit before the weights' mark is still replaced."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from bertkit import cli
from pipelines import examples
from pipelines import vocab as vocab_stage
from pipelines.io.vocabulary import load_vocab
from tests.support.released_dirs import EXAMPLE_FLAGS
from tests.support.s3_bucket import bucket_fixture, objects_under
from tests.test_export import write_checkpoint
from tests.test_released_start import FLAGS, released
from trainer import train
from trainer.export import WEIGHTS_METADATA, export_hf

TEXT = "The cat sat on the mat."
BUCKET = "exports"
# What the released-vocabulary run's export writes: the released directory's vocab.txt and
# tokenizer_config.json, bertkit's special_tokens_map.json; no tokenizer.json (it has none).
RELEASED_EXPORT = [
    "config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "vocab.txt",
]
BERTKIT_EXPORT = sorted([*RELEASED_EXPORT, "tokenizer.json"])
FOREIGN = (
    "holds model.safetensors, which no `bertkit export-hf` marked as its own (a model or "
    "tokenizer saved by another tool, or the export of a released model's run by a bertkit "
    "before the mark): nothing was replaced. Choose a new or empty --output"
)


@pytest.fixture(scope="module")
def other_vocab(sample_documents, tmp_path_factory) -> Path:
    """A bertkit vocabulary of 1,000 tokens: other ids than the sample vocabulary's."""
    output = tmp_path_factory.mktemp("other-vocab") / "vocab"
    documents = [str(d) for d in sample_documents]
    flags = ["--documents", *documents, "--output", str(output), "--vocab-size", "1000"]
    assert vocab_stage.run(flags) == 0
    return output


@pytest.fixture(scope="module")
def bertkit_run(other_vocab, tmp_path_factory) -> Path:
    """The checkpoints of a run on the other vocabulary (its export writes tokenizer.json)."""
    root = tmp_path_factory.mktemp("bertkit-run")
    write_checkpoint(root / "checkpoints", other_vocab)
    return root / "checkpoints"


@pytest.fixture(scope="module")
def released_run(sample_documents, sample_vocab, tmp_path_factory) -> tuple[Path, Path]:
    """(released directory, run started from it): a transformers BERT with the sample's
    vocab.txt and no tokenizer.json, shards made with it as the vocabulary, and a 0-step run
    from it."""
    root = tmp_path_factory.mktemp("released-run")
    original = released(root, sample_vocab)
    (original / "tokenizer.json").unlink()
    shards, run = root / "shards", root / "run"
    flags = ["--documents", str(sample_documents[0]), "--vocab", str(original), *EXAMPLE_FLAGS]
    assert examples.run([*flags, "--output", str(shards)]) == 0
    args = ["--shards", str(shards), "--init-checkpoint", str(original), *FLAGS]
    assert train.run([*args, "--output", str(run), "--stop-at-step", "0"]) == 0
    return original, run


def ids(directory: Path) -> list[int]:
    return transformers.AutoTokenizer.from_pretrained(str(directory))(TEXT).input_ids


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def export(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export-hf", *argv])
    return exit_info.value.code, capsys.readouterr().err


def test_overwrite_leaves_no_file_of_the_earlier_export(
    bertkit_run, released_run, other_vocab, sample_vocab, tmp_path, capsys
):
    original, run = released_run
    output = tmp_path / "hf"
    export_hf(bertkit_run, output)
    assert sorted(files(output)) == BERTKIT_EXPORT
    earlier = ids(output)
    assert earlier == load_vocab(str(other_vocab)).tokenizer.encode(TEXT).ids
    with safe_open(output / "model.safetensors", framework="pt") as weights:
        assert weights.metadata() == WEIGHTS_METADATA == {"format": "pt", "bertkit": "export-hf"}

    assert export(capsys, str(run), "--output", str(output), "--overwrite") == (0, "")
    assert sorted(files(output)) == RELEASED_EXPORT  # the earlier tokenizer.json is gone
    assert (output / "vocab.txt").read_bytes() == (sample_vocab / "vocab.txt").read_bytes()
    want = load_vocab(str(sample_vocab)).tokenizer.encode(TEXT).ids
    assert ids(output) == ids(original) == want != earlier
    assert len(want) == 9 and want[0] == 2 and want[-1] == 3  # [CLS] the cat … . [SEP]

    # And back: the bertkit vocabulary's export over the released one's.
    assert export(capsys, str(bertkit_run), "--output", str(output), "--overwrite") == (0, "")
    assert sorted(files(output)) == BERTKIT_EXPORT and ids(output) == earlier


def test_an_export_by_an_earlier_bertkit_is_still_replaced(bertkit_run, tmp_path, capsys):
    """Before the mark, an export's weights had transformers' metadata alone; its config.json
    has exactly export-hf's fields (no transformers_version), which tells it apart."""
    output = tmp_path / "hf"
    export_hf(bertkit_run, output)
    want = files(output)
    save_file(
        load_file(output / "model.safetensors"), output / "model.safetensors", {"format": "pt"}
    )
    (output / "special_tokens_map.json").unlink()
    # Nor had its config.json the dtype an export now says.
    config = json.loads((output / "config.json").read_text())
    assert config.pop("dtype") == "float32"
    (output / "config.json").write_text(json.dumps(config))
    assert export(capsys, str(bertkit_run), "--output", str(output)) == (
        2,
        f"bertkit export-hf: error: {output} is not empty (e.g. config.json); choose a new "
        "--output or pass --overwrite to replace the export's files in it\n",
    )
    assert export(capsys, str(bertkit_run), "--output", str(output), "--overwrite") == (0, "")
    assert files(output) == want
    # With transformers' transformers_version in config.json, it is not known as an export.
    config = json.loads((output / "config.json").read_text())
    (output / "config.json").write_text(json.dumps({**config, "transformers_version": "4.1"}))
    save_file(
        load_file(output / "model.safetensors"), output / "model.safetensors", {"format": "pt"}
    )
    before = files(output)
    assert export(capsys, str(bertkit_run), "--output", str(output), "--overwrite") == (
        2,
        f"bertkit export-hf: error: {output} {FOREIGN}\n",
    )
    assert files(output) == before


def test_a_directory_transformers_saved_is_refused_with_or_without_overwrite(
    bertkit_run, sample_vocab, tmp_path, capsys
):
    model = released(tmp_path, sample_vocab)  # save_pretrained's model and tokenizer
    tokenizer = tmp_path / "tokenizer"
    transformers.AutoTokenizer.from_pretrained(str(model)).save_pretrained(str(tokenizer))
    for directory, shown in ((model, "model.safetensors"), (tokenizer, "tokenizer.json")):
        before = files(directory)
        message = f"bertkit export-hf: error: {directory} {FOREIGN}\n".replace(
            "model.safetensors", shown, 1
        )
        for overwrite in ([], ["--overwrite"]):
            flags = ["--output", str(directory), *overwrite]
            assert export(capsys, str(bertkit_run), *flags) == (2, message)
            assert files(directory) == before


def test_the_released_model_the_run_started_from_is_refused(
    sample_shards, sample_vocab, tmp_path, capsys
):
    # `cp -r released copy; train --init-checkpoint copy; export-hf run --output copy
    # --overwrite`: the copy holds transformers' files, which no export wrote.
    copy = tmp_path / "copy"
    shutil.copytree(released(tmp_path, sample_vocab), copy)
    args = ["--shards", str(sample_shards), *FLAGS, "--stop-at-step", "0"]
    run = tmp_path / "run"
    assert train.run([*args, "--init-checkpoint", str(copy), "--output", str(run)]) == 0
    before = files(copy)
    flags = [str(run), "--output", str(copy), "--overwrite"]
    assert export(capsys, *flags) == (2, f"bertkit export-hf: error: {copy} {FOREIGN}\n")
    assert files(copy) == before

    # A run started from an export: that export, however its path is spelled, is refused.
    hf = tmp_path / "hf"
    assert export(capsys, str(run), "--output", str(hf)) == (0, "")
    later = tmp_path / "later"
    assert train.run([*args, "--init-checkpoint", str(hf), "--output", str(later)]) == 0
    before = files(hf)
    (tmp_path / "link").symlink_to(hf)
    for spelled in (hf, f"{hf}/", tmp_path / "run" / ".." / "hf", tmp_path / "link"):
        flags = [str(later), "--output", str(spelled), "--overwrite"]
        assert export(capsys, *flags) == (
            2,
            f"bertkit export-hf: error: --output {Path(spelled)} is the released model this run "
            "started from (--init-checkpoint): the export would replace its files. Choose "
            "another --output\n",
        )
        assert files(hf) == before
    # Elsewhere, the export of that run is made as ever.
    assert export(capsys, str(later), "--output", str(tmp_path / "hf2")) == (0, "")


s3 = bucket_fixture(BUCKET)


def s3_files(client, prefix: str) -> dict[str, bytes]:
    return objects_under(client, BUCKET, prefix)


def test_overwrite_on_s3_leaves_no_file_of_the_earlier_export(
    bertkit_run, released_run, sample_vocab, s3, tmp_path, capsys
):
    _, run = released_run
    url = f"s3://{BUCKET}/models/x"
    export_hf(bertkit_run, url)
    assert sorted(s3_files(s3, "models/x")) == BERTKIT_EXPORT
    assert export(capsys, str(run), "--output", url, "--overwrite") == (0, "")
    export_hf(run, tmp_path / "local")
    assert s3_files(s3, "models/x") == files(tmp_path / "local")  # no tokenizer.json
    assert sorted(s3_files(s3, "models/x")) == RELEASED_EXPORT

    # A prefix of files transformers saved is refused, with --overwrite too, and untouched.
    model = released(tmp_path, sample_vocab)
    for path in model.iterdir():
        s3.upload_file(str(path), BUCKET, f"models/theirs/{path.name}")
    before = s3_files(s3, "models/theirs")
    theirs = f"s3://{BUCKET}/models/theirs"
    message = f"bertkit export-hf: error: {theirs} {FOREIGN}\n"
    assert export(capsys, str(run), "--output", theirs, "--overwrite") == (2, message)
    assert s3_files(s3, "models/theirs") == before

    # A URL that is an object (a file uploaded under the name): refused, the object kept.
    s3.put_object(Bucket=BUCKET, Key="models/file", Body=b"mine")
    message = (
        f"bertkit export-hf: error: --output s3://{BUCKET}/models/file is an object, not a "
        "directory: the files would go beside it, under the same name. Choose a new or "
        "empty --output\n"
    )
    assert export(capsys, str(run), "--output", f"s3://{BUCKET}/models/file") == (2, message)
    assert s3.get_object(Bucket=BUCKET, Key="models/file")["Body"].read() == b"mine"
    assert s3_files(s3, "models/file") == {}


def test_a_signal_during_the_weights_write_is_one_line_and_leaves_no_temporary(
    bertkit_run, tmp_path, capsys, monkeypatch
):
    """SIGTERM ended export-hf silently (exit 143) and left safetensors' own `.tmpXXXXXX`
    beside the weights: a name no export writes, so every rerun, --overwrite too, refused
    the directory."""
    import os
    import signal

    from trainer import export as export_module

    output = tmp_path / "hf"
    export_hf(bertkit_run, output)
    written = export_module._save_weights

    def terminated(weights, path):
        written(weights, path)  # half-way: the temporary is there, not yet renamed
        assert path.name.startswith(".model.safetensors.tmp-")
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(export_module, "_save_weights", terminated)
    code, err = export(capsys, str(bertkit_run), "--output", str(output), "--overwrite")
    assert (code, err) == (
        143,
        "bertkit export-hf: interrupted (SIGTERM): --output may hold some files of this "
        "export beside the last one's; rerun it with --overwrite\n",
    )
    # No temporary left, and no config.json (deleted first): from_pretrained refuses it.
    assert sorted(files(output)) == [n for n in BERTKIT_EXPORT if n != "config.json"]
    monkeypatch.setattr(export_module, "_save_weights", written)
    assert export(capsys, str(bertkit_run), "--output", str(output), "--overwrite") == (0, "")


@pytest.mark.parametrize("name", ["../payload.txt", "/dev/zero"])
def test_a_checkpoint_naming_another_tokenizer_file_is_refused(
    released_run, tmp_path, capsys, name
):
    """The names came from the checkpoint as they were: `../payload.txt` was read beside the
    released model and written outside --output; `/dev/zero` was read until memory ran out."""
    import hashlib

    import torch

    from schemas.checkpoint import CheckpointKey
    from trainer.run.checkpoints import latest_checkpoint

    _, run = released_run
    tree = tmp_path / "tree"  # the run beside its released model, as the run recorded them
    shutil.copytree(run.parent, tree)
    changed = tree / run.name
    path = latest_checkpoint(changed / "checkpoints")
    checkpoint = torch.load(path, weights_only=True)
    payload = tree / "payload.txt"  # ../payload.txt beside the released model's folder
    payload.write_text("attacker content")
    files = checkpoint[CheckpointKey.START]["tokenizer_files"]
    files[name] = hashlib.sha256(payload.read_bytes()).hexdigest()
    torch.save(checkpoint, path)
    output = tmp_path / "export" / "hf"
    code, err = export(capsys, str(changed), "--output", str(output))
    assert (code, err) == (
        2,
        f"bertkit export-hf: error: the checkpoint records {name!r} as a tokenizer file of the "
        "released model the run started from, which no run records (it records vocab.txt, "
        "tokenizer.json, tokenizer_config.json, special_tokens_map.json): the checkpoint "
        "was changed after the run wrote it\n",
    )
    assert not (tmp_path / "export").exists() and not (tree / "export").exists()
    assert payload.read_text() == "attacker content"


def test_a_moved_released_model_is_found_through_vocab(released_run, tmp_path, capsys):
    """The released model's directory moved after the run: the refusal's hint, --vocab DIR,
    finds its vocabulary and its tokenizer files there (checked by their sha256s)."""
    import hashlib

    original, run = released_run
    tree = tmp_path / "tree"  # the run beside its released model, as the run recorded them
    shutil.copytree(run.parent, tree)
    moved = tmp_path / "moved"
    (tree / original.name).rename(moved)
    output = tmp_path / "hf"
    code, err = export(capsys, str(tree / run.name), "--output", str(output))
    assert code == 2 and err.startswith(
        f"bertkit export-hf: error: cannot use the vocabulary at {tree / original.name}: "
    )
    assert err.endswith("; if it moved, pass --vocab DIR\n")
    assert export(capsys, str(tree / run.name), "--output", str(output), "--vocab", str(moved)) == (
        0,
        "",
    )
    assert sorted(files(output)) == RELEASED_EXPORT
    for name in ("vocab.txt", "tokenizer_config.json"):
        assert (output / name).read_bytes() == (original / name).read_bytes(), name
    # A file of the moved directory changed since the run: named, with both digests.
    config = moved / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_max_length": 64}))
    recorded = hashlib.sha256((original / "tokenizer_config.json").read_bytes()).hexdigest()
    changed = hashlib.sha256(config.read_bytes()).hexdigest()
    code, err = export(
        capsys, str(tree / run.name), "--output", str(tmp_path / "hf2"), "--vocab", str(moved)
    )
    assert (code, err) == (
        2,
        f"bertkit export-hf: error: {config} (sha256 {changed[:12]}…) is not the file the run "
        f"started from (recorded {recorded[:12]}…), the released model's tokenizer_config.json: "
        "restore its directory, or pass as --vocab DIR the released model's directory, as "
        "released\n",
    )
