"""docs/adapt.md runs as written: every bash block of the page, in order, in a directory laid
out as the page assumes (`out/demo` from the demo's stages, `data/books` the sample's books).

Two things differ from a reader's run, both to keep the test short, neither in what the
commands are: the page's small BERT is the one it shows how to make with transformers
(`out/small-bert`, which the page says works the same way as the demo's export), and the
training run takes 4 steps and evaluates once, at the end, the first 64 held-out sequences of
each source, instead of 200 steps with an evaluation of 3,200 every 100."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adapt.md"

# What the test changes in the page's commands (see the module docstring).
SHORTER = {
    "out/demo/hf": "out/small-bert",
    "--max-steps 200": "--max-steps 4",
    "--eval-every 100": "--eval-every 4 --eval-batches 2",
    "--warmup-steps 20": "--warmup-steps 1",
}


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_the_page_s_blocks_are_found() -> None:
    blocks = bash_blocks(PAGE.read_text(encoding="utf-8"))
    firsts = [block.split()[0] for block in blocks]
    assert firsts == [
        ".venv/bin/python",
        "bertkit",
        "bertkit",
        "bertkit",
        "bertkit",
        ".venv/bin/python",
    ]
    assert all(old in "".join(blocks) for old in SHORTER)


@pytest.fixture
def demo_like(tmp_path: Path, sample_documents, sample_vocab, books_dir: Path) -> Path:
    """out/demo/documents/wikipedia and out/demo/vocab as the demo makes them (the session's
    copies: the sample's articles and its 8,000-token vocabulary), data/books the sample's
    books, .venv/bin/python this interpreter."""
    demo = tmp_path / "out" / "demo"
    shutil.copytree(sample_documents[0], demo / "documents" / "wikipedia")
    shutil.copytree(sample_vocab, demo / "vocab")
    shutil.copytree(books_dir, tmp_path / "data" / "books")
    # A script, not a symlink: a link to a venv's python outside the venv loses its packages.
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return tmp_path


def test_every_command_of_the_page_runs_as_written(demo_like: Path) -> None:
    script = "\n".join(bash_blocks(PAGE.read_text(encoding="utf-8")))
    for old, new in SHORTER.items():
        script = script.replace(old, new)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=demo_like,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The run started from the transformers model and trained on both sources.
    run = demo_like / "out" / "adapt" / "run"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluations = [row for row in rows if "sources" in row]
    assert evaluations and set(evaluations[-1]["sources"]) == {"shards-books", "shards-wiki"}
    trained = [row for row in rows if "drawn" in row]
    assert sum(trained[-1]["drawn"].values()) == 4 * 32
    assert "the released BERT at out/small-bert" in done.stderr
    # The export carries the original tokenizer files, and fill-mask printed its guesses.
    for name in ("tokenizer.json", "tokenizer_config.json"):
        original = (demo_like / "out" / "small-bert" / name).read_bytes()
        assert (demo_like / "out" / "adapt" / "hf" / name).read_bytes() == original
    guesses = done.stdout.strip().splitlines()[-1]
    assert guesses.startswith("[") and guesses.count("'") == 10  # five tokens
