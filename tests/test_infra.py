"""infra/dataflow: the Dockerfile and scripts pass hadolint and shellcheck, the Flex Template
metadata is what the commands take, and the launcher program runs a real stage."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
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
        [BIN / "shellcheck", *scripts, INFRA / "arguments.bash"],
        capture_output=True,
        text=True,
        check=False,
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
        "input",
        "output",
        "overwrite",
        "file_mb",
        "min_paragraph_words",
        "split_mb",
    ]
    assert metadata["parameters"][0] == {
        "name": "input",
        "label": "Input",
        "isOptional": False,
        "helpText": "input files or globs (repeatable): local, gs://, s3://; several as a "
        "comma list",
    }
    assert metadata["parameters"][2]["regexes"] == ["^(true|false)$"]
    examples = [p["name"] for p in template_metadata(STAGES["examples"])["parameters"]]
    assert examples[:5] == ["documents", "vocab", "output", "cased", "max_seq_length"]
    cased = template_metadata(STAGES["examples"])["parameters"][3]
    assert (cased["regexes"], cased["isOptional"]) == (["^(true|false)$"], True)


def test_template_flags_become_the_command_s():
    stage = STAGES["examples"]
    assert template_argv(
        stage,
        [
            "--documents=gs://b/documents/enwiki,gs://b/documents/books",
            "--vocab=gs://b/vocab",
            "--overwrite=true",
            "--whole_word_mask=false",
            "--cased=false",
            "--max_seq_length=128,512",
            "--runner=DataflowRunner",
            "--project=p",
        ],
    ) == [
        "--documents=gs://b/documents/enwiki",
        "--documents=gs://b/documents/books",
        "--vocab=gs://b/vocab",
        "--overwrite",
        "--no-whole_word_mask",
        "--no-cased",
        "--max_seq_length=128,512",
        "--runner=DataflowRunner",
        "--project=p",
    ]
    with pytest.raises(SystemExit, match=r"--overwrite=yes: a yes/no parameter takes true"):
        template_argv(stage, ["--overwrite=yes"])
    with pytest.raises(
        SystemExit,
        match=r"BERTKIT_STAGE='train': not a Beam stage; one of "
        r"wikipedia, books, corpus, dedup, vocab, examples, chain",
    ):
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
        [
            sys.executable,
            INFRA / "main.py",
            f"--input={tmp_path / 'corpus.txt'}",
            f"--output={out}",
            "--format=lines",
            "--overwrite=false",
            "--lines_per_document=2",
        ],
        env={**os.environ, "BERTKIT_STAGE": "books", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["counts"]["documents"] == 2  # 3 lines, 2 per document


# Stand-ins for the tools build.sh and run.sh call, logging their arguments: gcloud keeps the
# template specs it "builds" (the image they name, as `--print-only` shows gcloud writes
# them) and refuses --env beside --image, as gcloud 528 does.
FAKE_GCLOUD = r"""#!/usr/bin/env bash
echo "gcloud $*" >> "$FAKE_LOG"
if [ "$1 $2 $3" = "dataflow flex-template build" ]; then
  spec=$4 image=""
  shift 4
  while [ $# -gt 0 ]; do
    case $1 in
      --image) image=$2 ;;
      --env) echo "ERROR: --env needs --flex-template-base-image" >&2; exit 2 ;;
    esac
    shift
  done
  printf '{"image": "%s", "sdkInfo": {"language": "PYTHON"}}' "$image" \
    > "$FAKE_BUCKET/$(basename "$spec")"
elif [ "$1 $2" = "storage cat" ]; then
  cat "$FAKE_BUCKET/$(basename "$3")"
elif [ "$1 $2 $3" = "dataflow flex-template run" ]; then
  echo 2026-11-25_01_02_03-123
fi
"""
FAKE_DOCKER = r"""#!/usr/bin/env bash
echo "docker $*" >> "$FAKE_LOG"
if [ "$1 ${*: -1}" = "build -" ]; then sed 's/^/  /' >> "$FAKE_LOG"; fi
"""
FAKE_PYTHON = r"""#!/usr/bin/env bash
if [ "$1" = "-m" ]; then echo "python $*" >> "$FAKE_LOG"; exit 0; fi
exec "$REAL_PYTHON" "$@"
"""


def test_run_sh_launches_on_the_image_build_sh_made_in_any_repository(tmp_path):
    """build.sh with a REPOSITORY, then run.sh: the template names its stage's tag (which
    sets BERTKIT_STAGE), and the job's workers get that image from the template."""
    checkout = tmp_path / "checkout"  # a copy: build.sh cds to its checkout and writes dist/
    (checkout / "infra").mkdir(parents=True)
    shutil.copytree(INFRA, checkout / "infra" / "dataflow")
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, checkout / name)
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, text in [("gcloud", FAKE_GCLOUD), ("docker", FAKE_DOCKER), ("python", FAKE_PYTHON)]:
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    (tmp_path / "bucket").mkdir()
    log = tmp_path / "log"
    env = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "FAKE_BUCKET": str(tmp_path / "bucket"),
        "REAL_PYTHON": sys.executable,
    }
    script = checkout / "infra" / "dataflow"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*args], env=env, capture_output=True, text=True, check=False)

    built = run(str(script / "build.sh"), "proj", "europe-west4", "gs://b", "my-repo")
    assert built.returncode == 0, built.stderr
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    image = f"europe-west4-docker.pkg.dev/proj/my-repo/bertkit:{version}"
    calls = log.read_text()
    assert f"docker push {image}\n" in calls
    assert f"docker build -t {image}-books -\n  FROM {image}\n  ENV BERTKIT_STAGE=books\n" in calls
    assert json.loads((tmp_path / "bucket" / "books.json").read_text())["image"] == (
        f"{image}-books"
    )
    assert sorted(p.name for p in (tmp_path / "bucket").iterdir()) == [
        f"{stage}.json" for stage in sorted(STAGES)
    ]

    launched = run(
        str(script / "run.sh"),
        "proj",
        "europe-west4",
        "gs://b",
        "books",
        "input=gs://b/books/*.txt",
        "output=gs://b/documents/books",
    )
    assert (launched.returncode, launched.stdout) == (0, "2026-11-25_01_02_03-123\n")
    (call,) = [line for line in log.read_text().splitlines() if "flex-template run" in line]
    assert "--template-file-gcs-location gs://b/templates/books.json" in call
    assert call.endswith(
        f"--parameters ^~^sdk_container_image={image}-books~input=gs://b/books/*.txt"
        "~output=gs://b/documents/books --format value(job.id)"
    )

    refused = run(str(script / "run.sh"), "proj", "europe-west4", "gs://b", "train")
    assert refused.returncode == 2
    assert (
        "stage train: not a Beam stage; one of wikipedia, books, corpus, dedup, vocab, examples, chain"
        in (refused.stderr)
    )
