"""infra/dataflow: the Dockerfile and scripts pass hadolint and shellcheck, the Flex Template
metadata is what the commands take, and the launcher program runs a real stage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import dataflow
from pipelines.dataflow import STAGES, template_argv, template_metadata
from schemas.manifest import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra" / "dataflow"
BIN = Path(sys.executable).parent


def test_the_dockerfile_passes_hadolint():
    result = subprocess.run(
        [BIN / "hadolint", INFRA / "Dockerfile"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, "")


def test_the_scripts_pass_shellcheck():
    scripts = sorted(INFRA.glob("*.sh"))
    assert [s.name for s in scripts] == ["build.sh", "run.sh", "run_chain.sh"]
    result = subprocess.run(
        [BIN / "shellcheck", *scripts], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, "")
    assert all(os.access(script, os.X_OK) for script in scripts)


def test_the_image_is_beam_s_sdk_image_at_the_pinned_version():
    dockerfile = (INFRA / "Dockerfile").read_text()
    pinned = re.search(r"^apache-beam==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned is not None
    assert f"ARG BEAM_VERSION={pinned.group(1)}\n" in dockerfile
    assert "FROM apache/beam_python3.11_sdk:${BEAM_VERSION}\n" in dockerfile
    assert "-c /template/constraints.txt /template/bertkit-*.whl" in dockerfile
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in dockerfile  # how Dataflow starts workers
    assert "ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/main.py" in dockerfile


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_committed_template_metadata_is_what_the_command_takes(stage):
    committed = json.loads((INFRA / "metadata" / f"{stage}.json").read_text())
    assert committed == template_metadata(STAGES[stage]), (
        "infra/dataflow/metadata is stale: run `python -m pipelines.dataflow "
        "infra/dataflow/metadata`"
    )


def test_template_metadata_lists_every_flag_with_its_help():
    metadata = template_metadata(STAGES["wikipedia"])
    assert metadata["name"] == "bertkit-wikipedia"
    assert [p["name"] for p in metadata["parameters"]] == [
        "input", "output", "overwrite", "file_mb", "min_paragraph_words", "split_mb",
    ]  # fmt: skip
    assert metadata["parameters"][0] == {
        "name": "input", "label": "Input", "isOptional": False,
        "helpText": "input files or globs (repeatable): local, gs://, s3://; several as a "
                    "comma list",
    }  # fmt: skip
    assert metadata["parameters"][2]["regexes"] == ["^(true|false)$"]
    examples = [p["name"] for p in template_metadata(STAGES["examples"])["parameters"]]
    assert examples[:4] == ["documents", "vocab", "output", "max_seq_length"]


def test_template_flags_become_the_command_s():
    stage = STAGES["examples"]
    assert template_argv(stage, [
        "--documents=gs://b/documents/enwiki,gs://b/documents/books", "--vocab=gs://b/vocab",
        "--overwrite=true", "--whole_word_mask=false", "--max_seq_length=128,512",
        "--runner=DataflowRunner", "--project=p",
    ]) == [
        "--documents=gs://b/documents/enwiki", "--documents=gs://b/documents/books",
        "--vocab=gs://b/vocab", "--overwrite", "--no-whole_word_mask",
        "--max_seq_length=128,512", "--runner=DataflowRunner", "--project=p",
    ]  # fmt: skip
    with pytest.raises(SystemExit, match=r"--overwrite=yes: a yes/no parameter takes true"):
        template_argv(stage, ["--overwrite=yes"])
    with pytest.raises(SystemExit, match=r"BERTKIT_STAGE='train': not a Beam stage; one of "
                       r"wikipedia, books, vocab, examples"):  # fmt: skip
        dataflow.launch("train", [])


def test_the_launcher_program_runs_a_stage_on_template_flags(tmp_path):
    """infra/dataflow/main.py as the template launcher runs it: BERTKIT_STAGE from the spec,
    every parameter as --name=value."""
    lines = [
        f"Book line {i}: the quick brown fox jumps over the lazy dog again and again."
        for i in range(3)
    ]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, INFRA / "main.py", f"--input={tmp_path / 'corpus.txt'}",
         f"--output={out}", "--format=lines", "--overwrite=false", "--lines_per_document=2"],
        env={**os.environ, "BERTKIT_STAGE": "books", "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["counts"]["documents"] == 2  # 3 lines, 2 per document
