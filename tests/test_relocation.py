"""The demo's output copied to another directory (the original deleted), and reached through
a symlink, works from a third working directory with every command that reads what another
stage wrote, with no --vocab: manifests and checkpoints record the paths between artifacts
relative to themselves (pipelines/io/recorded_paths.py). Manifests written before, with the
paths as typed in the directory the stage ran in, still read from there."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from bertkit import demo
from pipelines import dedup, examples, inspect, vocab
from pipelines.io.recorded_paths import join_relative, record_path, resolve_path
from schemas.checkpoint import CheckpointKey
from trainer import export, train
from trainer.run.checkpoints import latest_checkpoint

STEPS = 2  # the demo's training steps: one checkpoint, at step 2
TINY_RUN = ["--model", "tiny", "--micro-batch-size", "8", "--num-workers", "0"]
TINY_RUN += ["--warmup-steps", "1", "--eval-every", "0", "--eval-batches", "1"]


# --------------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize(
    ("target", "manifest_dir", "recorded"),
    [
        ("out/demo/vocab", "out/demo/shards", "../vocab"),
        ("out/demo/documents/wikipedia", "out/demo/shards", "../documents/wikipedia"),
        ("out/demo/vocab", "out/demo/run/checkpoints", "../../vocab"),
        ("vocab", "vocab-shards", "../vocab"),
        ("/data/vocab", "/scratch/shards", "/data/vocab"),  # only the root in common
        ("s3://bucket/vocab", "out/shards", "s3://bucket/vocab"),
        ("gs://bucket/a/vocab", "gs://bucket/a/shards", "gs://bucket/a/vocab"),
        ("https://host/vocab", "out/shards", "https://host/vocab"),
    ],
)
def test_what_a_manifest_records(target: str, manifest_dir: str, recorded: str) -> None:
    assert record_path(target, manifest_dir) == recorded


def test_a_local_artifact_beside_a_manifest_on_object_storage_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert record_path("out/vocab", "s3://bucket/shards") == str(tmp_path / "out" / "vocab")


@pytest.mark.parametrize(
    ("directory", "relative", "joined"),
    [
        ("copy/shards", "../vocab", "copy/vocab"),
        ("link/run/checkpoints", "../../vocab", "link/vocab"),
        ("shards", "../vocab", "vocab"),
        ("s3://bucket/out/shards", "../vocab", "s3://bucket/out/vocab"),
        ("s3://bucket/shards", "../../../vocab", "s3://bucket/vocab"),  # never above the bucket
        ("https://host/a/shards", "../vocab", "https://host/a/vocab"),
    ],
)
def test_a_recorded_path_joins_the_manifest_s_directory_as_given(directory, relative, joined):
    assert join_relative(directory, relative) == joined


def test_a_relative_path_is_looked_up_beside_the_manifest_then_as_recorded(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "copy" / "shards").mkdir(parents=True)
    (tmp_path / "out" / "vocab").mkdir(parents=True)
    (tmp_path / "out" / "vocab" / "vocab.txt").write_text("[PAD]\n")
    # An older manifest's working-directory path: not beside the manifest, found from here.
    assert resolve_path("out/vocab", "copy/shards", "vocab.txt") == "out/vocab"
    # Neither: where it belongs, beside the manifest, for the caller's "not found".
    assert resolve_path("../vocab", "copy/shards", "vocab.txt") == "copy/vocab"
    (tmp_path / "copy" / "vocab").mkdir()
    (tmp_path / "copy" / "vocab" / "vocab.txt").write_text("[PAD]\n")
    assert resolve_path("../vocab", "copy/shards", "vocab.txt") == "copy/vocab"
    # A path naming the marker file itself (a plain vocab.txt) is found as a directory is.
    assert resolve_path("out/vocab/vocab.txt", "copy/shards", "vocab.txt") == "out/vocab/vocab.txt"
    assert resolve_path("/abs/vocab", "copy/shards", "vocab.txt") == "/abs/vocab"
    assert resolve_path("s3://b/vocab", "copy/shards", "vocab.txt") == "s3://b/vocab"


# --------------------------------------------------------------------------- the demo, moved


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict:
    """`bertkit demo` (2 training steps) run in `made/` with its default relative output,
    copied to `moved/demo`, the original deleted; `linked` a symlink to the copy;
    `elsewhere` the working directory every command runs in."""
    root = tmp_path_factory.mktemp("relocation")
    made = root / "made"
    made.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(made)
        assert demo.run(["--train-steps", str(STEPS)]) == 0  # into out/demo
    shutil.copytree(made / "out" / "demo", root / "moved" / "demo")
    shutil.rmtree(made)  # nothing may read the original any more
    (root / "linked").symlink_to(root / "moved" / "demo", target_is_directory=True)
    (root / "elsewhere").mkdir()
    moved = root / "moved" / "demo"
    return {
        "root": root,
        "moved": moved,
        "elsewhere": root / "elsewhere",
        "documents": ["books", "wikipedia"],
        "tokens": "8,000",
    }


@pytest.fixture
def elsewhere(places, monkeypatch) -> Path:
    monkeypatch.chdir(places["elsewhere"])
    return places["elsewhere"]


def test_the_tree_s_links_are_relative(places) -> None:
    moved, documents = places["moved"], places["documents"]
    shards = json.loads((moved / "shards" / "manifest.json").read_text())
    assert shards["vocab"]["path"] == "../vocab"
    assert sorted(i["path"] for i in shards["inputs"]) == [f"../documents/{d}" for d in documents]
    vocab_json = json.loads((moved / "vocab" / "vocab.json").read_text())
    assert [i["path"] for i in vocab_json["inputs"]] == [f"../documents/{d}" for d in documents]
    checkpoint = torch.load(latest_checkpoint(moved / "run" / "checkpoints"), weights_only=True)
    assert checkpoint[CheckpointKey.VOCAB]["path"] == "../../vocab"
    assert checkpoint[CheckpointKey.DATA]["manifest"] == "../../shards/manifest.json"


TREES = ["../moved/demo", "../linked"]  # the copy, and the copy through a symlink


def vocabulary_line(directory: str, tokens: str) -> str:
    return f"vocabulary {directory}/vocab.txt ({tokens} tokens, sha256 matches the manifest)"


@pytest.mark.parametrize("tree", TREES)
def test_inspect_shows_tokens_and_reads_every_artifact(tree, places, elsewhere, capsys) -> None:
    assert inspect.run([f"{tree}/shards", "--show", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == vocabulary_line(f"{tree}/vocab", places["tokens"])
    assert lines[2].startswith("  A  [CLS] ")
    targets = [f"documents/{d}" for d in places["documents"]]
    targets += ["shards", "vocab", "run/checkpoints"]
    for target in targets:
        assert inspect.run([f"{tree}/{target}"]) == 0, target
    out = capsys.readouterr().out
    assert f", path {tree}/vocab, size " in out  # the shards manifest's, where it is now
    assert f"vocabulary: {tree}/vocab (" in out  # the checkpoint's, found beside it
    # The data report follows the shards manifest to its documents directories.
    report = f"report-{Path(tree).name}.html"
    assert inspect.run([f"{tree}/shards", "--report", report]) == 0
    assert "not readable from here" not in Path(report).read_text()


@pytest.mark.parametrize("tree", TREES)
def test_export_hf_finds_the_run_s_vocabulary(tree: str, elsewhere, places) -> None:
    output = f"hf-{Path(tree).name}"
    assert export.run([f"{tree}/run/checkpoints", "--output", output]) == 0
    exported = (Path(output) / "vocab.txt").read_bytes()
    assert exported == (places["moved"] / "vocab" / "vocab.txt").read_bytes()


@pytest.mark.parametrize("tree", TREES)
def test_train_with_dynamic_masks_finds_the_shards_vocabulary(tree: str, elsewhere) -> None:
    run_dir = f"dynamic-{Path(tree).name}"
    flags = [*TINY_RUN, "--shards", f"{tree}/shards", "--output", run_dir, "--max-steps", "2"]
    assert train.run([*flags, "--masking", "dynamic"]) == 0
    checkpoint = torch.load(latest_checkpoint(Path(run_dir) / "checkpoints"), weights_only=True)
    # From dynamic-*/checkpoints to the tree's vocabulary, as typed from here.
    assert checkpoint[CheckpointKey.VOCAB]["path"] == f"../../{tree}/vocab"
    assert export.run([f"{run_dir}/checkpoints", "--output", f"{run_dir}-hf"]) == 0


def test_the_copied_run_resumes_through_the_symlink(elsewhere, places) -> None:
    args = demo.train_args(Path("../linked/shards"), Path("../linked/run"), STEPS + 1)
    args.remove("--overwrite")
    assert train.run([*args, "--resume", "--eval-batches", "1"]) == 0
    checkpoints = places["moved"] / "run" / "checkpoints"
    checkpoint = torch.load(latest_checkpoint(checkpoints), weights_only=True)
    assert checkpoint[CheckpointKey.STEP] == STEPS + 1
    assert checkpoint[CheckpointKey.VOCAB]["path"] == "../../vocab"


def test_stages_read_the_copied_documents_and_vocabulary(elsewhere, places, capsys) -> None:
    documents = [f"../moved/demo/documents/{d}" for d in places["documents"]]
    assert vocab.run(["--documents", *documents, "--output", "vocab", "--vocab-size", "1000"]) == 0
    learned = json.loads(Path("vocab/vocab.json").read_text())
    assert [i["path"] for i in learned["inputs"]] == [f"../{d}" for d in documents]
    assert dedup.run(["--documents", *documents, "--output", "dedup"]) == 0
    deduplicated = json.loads(Path("dedup/_manifest.json").read_text())
    assert [i["path"] for i in deduplicated["inputs"]] == [f"../{d}" for d in documents]
    flags = ["--vocab", "../moved/demo/vocab", "--output", "shards", "--dupe-factor", "1"]
    assert examples.run(["--documents", "dedup", *flags, "--max-seq-length", "64"]) == 0
    made = json.loads(Path("shards/manifest.json").read_text())
    assert made["vocab"]["path"] == "../../moved/demo/vocab"
    assert [i["path"] for i in made["inputs"]] == ["../dedup"]
    # The dataset card followed the dedup manifest's relative inputs to their licences.
    card = Path("shards/README.md").read_text()
    assert "documents deduplicated from" in card and "public-domain" in card
    flat = re.sub(r" \\\n +", " ", card)  # the card wraps long commands
    assert f"bertkit dedup --documents {' '.join(documents)} --output dedup\n" in flat
    capsys.readouterr()
    assert inspect.run(["shards", "--show", "1"]) == 0
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown == vocabulary_line("../moved/demo/vocab", places["tokens"])


def test_a_symlinked_part_resolves_beside_the_link_not_its_target(elsewhere, places, capsys):
    """`assembled/shards` links to shards stored without a vocabulary beside them: the
    manifest's `../vocab` is `assembled/vocab` (the tree as the user sees it), not the
    link target's sibling."""
    root, moved = places["root"], places["moved"]
    store = root / "store" / "shards"
    store.mkdir(parents=True)
    shutil.copy(moved / "shards" / "manifest.json", store / "manifest.json")
    for split_dir in (moved / "shards").glob("seq*"):
        (store / split_dir.name).symlink_to(split_dir, target_is_directory=True)
    assembled = root / "assembled"
    assembled.mkdir()
    (assembled / "shards").symlink_to(store, target_is_directory=True)
    (assembled / "vocab").symlink_to(moved / "vocab", target_is_directory=True)
    assert not (store.parent / "vocab").exists()
    assert inspect.run(["../assembled/shards", "--show", "1"]) == 0
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown == vocabulary_line("../assembled/vocab", places["tokens"])


def test_older_manifests_paths_read_from_where_the_stage_ran(places, tmp_path, monkeypatch, capsys):
    """Manifests and checkpoints written before the rule hold paths as typed in the
    directory the stage ran in: from there, inspect, dynamic masking and export-hf find them."""
    monkeypatch.chdir(tmp_path)
    moved = places["moved"]
    os.makedirs("old")
    shutil.copytree(moved / "vocab", "old/vocab")
    shutil.copytree(moved / "shards", "old/shards")
    manifest = json.loads(Path("old/shards/manifest.json").read_text())
    manifest["vocab"]["path"] = "old/vocab"
    Path("old/shards/manifest.json").write_text(json.dumps(manifest))
    checkpoint = torch.load(latest_checkpoint(moved / "run" / "checkpoints"), weights_only=True)
    checkpoint[CheckpointKey.VOCAB]["path"] = "old/vocab"
    os.makedirs("old/checkpoints")
    torch.save(checkpoint, "old/checkpoints/step-00000003.pt")
    Path("old/checkpoints/latest").write_text("step-00000003.pt\n")

    assert inspect.run(["old/shards", "--show", "1"]) == 0
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown == vocabulary_line("old/vocab", places["tokens"])
    flags = [*TINY_RUN, "--shards", "old/shards", "--output", "run", "--max-steps", "1"]
    assert train.run([*flags, "--masking", "dynamic"]) == 0
    assert export.run(["old/checkpoints", "--output", "hf"]) == 0
    assert Path("hf/vocab.txt").read_bytes() == Path("old/vocab/vocab.txt").read_bytes()
