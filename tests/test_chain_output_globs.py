"""`bertkit chain` refuses an input glob that reaches anything the chain writes below
--output (each stage's directory, its files and its `_rejects/`), before any work: a rerun
would read its own rejects as input, and `--overwrite` would delete them first."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import chain


@pytest.mark.parametrize(
    "glob",
    [
        "*/*/*/*.jsonl",  # data/corpus/part/a.jsonl, out/documents/corpus/_rejects/*.jsonl
        "*/documents/*/_rejects/*.jsonl",  # nothing but the chain's own rejects
        "*/shards/_rejects/*.jsonl",  # the examples stage's rejects
        "*/vocab/*.json",  # the vocabulary
    ],
)
def test_a_glob_reaching_the_chains_outputs_is_refused_and_nothing_written(
    tmp_path: Path, capsys, glob: str
) -> None:
    part = tmp_path / "data" / "corpus" / "part"
    part.mkdir(parents=True)
    (part / "a.jsonl").write_text('{"text": "one sentence here."}\n')
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "one sentence here."}\n')
    output = tmp_path / "out"
    pattern = f"{tmp_path}/{glob}"
    with pytest.raises(SystemExit) as stopped:
        chain.run(["--corpus", pattern, "--output", str(output)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        f"bertkit chain: error: --output {output} is inside --corpus {pattern!r} (the glob "
        "matches it or the files it will hold): choose an --output outside the inputs\n"
    )
    assert not output.exists()


def test_a_glob_beside_the_output_is_not_refused(tmp_path: Path, capsys) -> None:
    """`*/*.jsonl` holds data/a.jsonl and no name the chain writes (those lie deeper)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "one sentence here."}\n')
    from pipelines.beam.stage_paths import path_problem
    from pipelines.chain.cli import _PATHS
    from pipelines.chain.config import ChainConfig

    config = ChainConfig(output=str(tmp_path / "out"), corpus=(f"{tmp_path}/*/*.jsonl",))
    assert path_problem(config, _PATHS) is None
