"""The layers, enforced: who may import whom (read from every module's source with ast).

    bertkit/                         the application (the `bertkit` command, the demo):
                                     schemas/, pipelines/ and trainer/, the only code that
                                     imports both of the last two
    trainer/                         schemas, pipelines/io and pipelines/command only; never
                                     Apache Beam
    pipelines/ (the rest)            anything in pipelines/ and schemas/
    pipelines/text/, pipelines/bert/ schemas, pipelines/io and themselves; never Apache Beam
    pipelines/command/               (flags from a config, the progress line) schemas,
                                     pipelines/io and itself; never Apache Beam
    pipelines/io/                    schemas and itself; never Apache Beam
    schemas/                         imports nothing of the project
    bench/                           anything; of tests/, only tests/support (the loopback
                                     servers and the fault machinery the tests use too)

Lower never imports higher, with no exception: nothing below bertkit/ imports it, pipelines/
never imports trainer/, and no product code (schemas, pipelines, trainer, bertkit) imports
bench/ or tests/. Imports inside functions count too: a lazy import still crosses the layer
when it runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("schemas", "pipelines", "trainer", "bertkit", "bench", "tests")
PRODUCT = ("schemas", "pipelines", "trainer", "bertkit")  # what the wheel ships
BEAM_FREE = ("pipelines.io", "pipelines.command", "pipelines.text", "pipelines.bert")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(module: str, source: str, is_package: bool = False) -> list[str]:
    """Every module `source` imports, relative imports resolved against `module`."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            # `from pipelines import storage` imports pipelines.storage
            found += [f"{target}.{alias.name}" for alias in node.names] or [target]
    return found


def within(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


def violations(module: str, imports: list[str]) -> list[str]:
    """The layer rules broken by `module` importing `imports`."""
    problems = []
    for name in imports:
        ours = name.split(".")[0] in PROJECT
        if within(module, "schemas") and ours and not within(name, "schemas"):
            problems.append(f"{module} imports {name}: schemas/ imports nothing of the project")
        if any(within(module, layer) for layer in BEAM_FREE):
            allowed = ("schemas", "pipelines.io", module.rsplit(".", 1)[0])
            if within(name, "apache_beam"):
                problems.append(f"{module} imports {name}: this layer is Beam-free")
            elif ours and not any(within(name, layer) for layer in allowed):
                problems.append(f"{module} imports {name}: below the Beam stages")
        trainer_may = ("schemas", "trainer", "pipelines.io", "pipelines.command")
        if within(module, "trainer") and ours and not any(within(name, t) for t in trainer_may):
            problems.append(
                f"{module} imports {name}: trainer/ imports schemas, pipelines.io, pipelines.command"
            )
        if within(module, "trainer") and within(name, "apache_beam"):
            problems.append(f"{module} imports {name}: the trainer never loads Beam")
        if within(module, "pipelines") and within(name, "trainer"):
            problems.append(f"{module} imports {name}: only bertkit/ imports pipelines and trainer")
        below_app = any(within(module, layer) for layer in ("schemas", "pipelines", "trainer"))
        if below_app and within(name, "bertkit"):
            problems.append(f"{module} imports {name}: nothing below bertkit/ imports it")
        product = any(within(module, layer) for layer in PRODUCT)
        if product and within(name, "bench"):
            problems.append(f"{module} imports {name}: the product never imports bench/")
        support = within(name, "tests.support")
        if within(module, "bench") and within(name, "tests") and not support:
            problems.append(f"{module} imports {name}: bench/ imports tests/support only")
        bench_support = within(module, "bench") and support
        if not within(module, "tests") and ours and within(name, "tests") and not bench_support:
            problems.append(f"{module} imports {name}: nothing imports tests/")
    return problems


def project_modules() -> list[tuple[str, Path]]:
    # Not what lies in hidden folders (bench/.work: benchmarks' throwaway venvs and copies).
    paths = [
        p
        for layer in ("schemas", "pipelines", "trainer", "bertkit", "bench")
        for p in (ROOT / layer).rglob("*.py")
        if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    ]
    return [(module_name(p), p) for p in sorted(paths)]


def test_every_module_keeps_to_its_layer() -> None:
    problems = []
    for module, path in project_modules():
        imports = imported_modules(module, path.read_text("utf-8"), path.name == "__init__.py")
        problems += violations(module, imports)
    assert problems == []


def test_the_folders_are_the_layers() -> None:
    modules = {module for module, _ in project_modules()}
    layers = (
        "pipelines.io",
        "pipelines.command",
        "pipelines.text",
        "pipelines.bert",
        "pipelines.beam",
    )
    for layer in (*layers, "bertkit"):
        assert layer in modules, f"{layer}/ is missing its __init__.py"
    flat = {m for m in modules if m.count(".") == 1 and m.startswith("pipelines.")}
    stages = {
        "pipelines.wikipedia",
        "pipelines.books",
        "pipelines.chain",
        "pipelines.corpus",
        "pipelines.dedup",
        "pipelines.vocab",
        "pipelines.examples",
        "pipelines.inspect",
        "pipelines.dataflow",
    }
    assert flat - set(layers) == stages


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "schemas.x",
            "from pipelines.io import storage",
            ["schemas.x imports pipelines.io.storage: schemas/ imports nothing of the project"],
        ),
        ("schemas.x", "import numpy\nfrom schemas.vocab import VOCAB_FILE", []),
        ("trainer.data", "from pipelines.io.shards import check_shard", []),
        ("trainer.train", "from pipelines.command.flags import parse_config", []),
        (
            "pipelines.command.progress",
            "import apache_beam.metrics",
            ["pipelines.command.progress imports apache_beam.metrics: this layer is Beam-free"],
        ),
        (
            "pipelines.command.flags",
            "from pipelines.beam.runner import parse_stage",
            [
                "pipelines.command.flags imports pipelines.beam.runner.parse_stage: below the Beam stages"
            ],
        ),
        (
            "trainer.data",
            "def f():\n    from pipelines.bert import draws",
            [
                "trainer.data imports pipelines.bert.draws: trainer/ imports schemas, pipelines.io, pipelines.command"
            ],
        ),
        (
            "trainer.export",
            "import apache_beam as beam",
            ["trainer.export imports apache_beam: the trainer never loads Beam"],
        ),
        (
            "pipelines.io.storage",
            "from apache_beam.io.filesystems import FileSystems",
            [
                "pipelines.io.storage imports apache_beam.io.filesystems.FileSystems: this layer is Beam-free"
            ],
        ),
        (
            "pipelines.io.shards",
            "from pipelines.beam import files",
            ["pipelines.io.shards imports pipelines.beam.files: below the Beam stages"],
        ),
        ("pipelines.text.wikitext", "from pipelines.text.wikitemplates import render_template", []),
        (
            "pipelines.vocab",
            "from trainer import train",
            ["pipelines.vocab imports trainer.train: only bertkit/ imports pipelines and trainer"],
        ),
        (
            "pipelines.examples.cli",
            "def main():\n    from trainer import train",
            [
                "pipelines.examples.cli imports trainer.train: only bertkit/ imports pipelines and trainer"
            ],
        ),
        ("bertkit.demo", "from pipelines import wikipedia\nfrom trainer import train", []),
        (
            "bertkit.cli",
            "import schemas.manifest\nimport pipelines.inspect\nimport trainer.export",
            [],
        ),
        (
            "trainer.train",
            "from bertkit import demo",
            [
                "trainer.train imports bertkit.demo: trainer/ imports schemas, pipelines.io, pipelines.command",
                "trainer.train imports bertkit.demo: nothing below bertkit/ imports it",
            ],
        ),
        (
            "pipelines.wikipedia",
            "from bertkit.cli import COMMANDS",
            ["pipelines.wikipedia imports bertkit.cli.COMMANDS: nothing below bertkit/ imports it"],
        ),
        (
            "schemas.manifest",
            "import bertkit",
            [
                "schemas.manifest imports bertkit: schemas/ imports nothing of the project",
                "schemas.manifest imports bertkit: nothing below bertkit/ imports it",
            ],
        ),
        (
            "bertkit.cli",
            "from bench import faults",
            ["bertkit.cli imports bench.faults: the product never imports bench/"],
        ),
        (
            "pipelines.beam.runner",
            "import bench.measure",
            ["pipelines.beam.runner imports bench.measure: the product never imports bench/"],
        ),
        (
            "bench.loader",
            "from tests.s3server import start_s3_server",
            [
                "bench.loader imports tests.s3server.start_s3_server: bench/ imports tests/support only",
                "bench.loader imports tests.s3server.start_s3_server: nothing imports tests/",
            ],
        ),
        ("bench.loader", "from tests.support.s3server import start_s3_server", []),
        (
            "pipelines.vocab",
            "from tests.support.s3server import start_s3_server",
            [
                "pipelines.vocab imports tests.support.s3server.start_s3_server: nothing imports tests/"
            ],
        ),
    ],
)
def test_rules_on_literal_imports(module: str, source: str, expected: list[str]) -> None:
    assert violations(module, imported_modules(module, source)) == expected


def test_relative_imports_are_resolved() -> None:
    assert imported_modules("pipelines.io.shards", "from .hashing import HashingStream") == [
        "pipelines.io.hashing.HashingStream"
    ]
    assert imported_modules("pipelines.io", "from . import storage", is_package=True) == [
        "pipelines.io.storage"
    ]


def test_the_trainer_export_and_io_never_load_beam() -> None:
    code = (
        "import sys\n"
        "import trainer.export, trainer.data, trainer.train, trainer.evaluate\n"
        "import pipelines.io.storage, pipelines.io.shards, pipelines.io.vocabulary\n"
        "import pipelines.io.retry, pipelines.io.compressed\n"
        "import pipelines.command.flags, pipelines.command.progress\n"
        "import pipelines.text.wikidump, pipelines.text.wikitext, pipelines.text.booktext\n"
        "import pipelines.bert.pairs, pipelines.bert.masking\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'apache_beam')\n"
        "print(len(loaded), loaded[:3])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.strip() == "0 []"


def test_nothing_the_trainer_imports_loads_beam() -> None:
    """Every trainer/ module and every Beam-free layer, imported in one process: whatever
    they import in turn (pipelines.io, pipelines.command, their own imports) loads no Beam."""
    modules = [
        module
        for module, _ in project_modules()
        if any(within(module, layer) for layer in ("trainer", *BEAM_FREE))
    ]
    code = (
        "import importlib, sys\n"
        f"for module in {modules!r}:\n"
        "    importlib.import_module(module)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'apache_beam')\n"
        "print(len(loaded), loaded[:3])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "trainer.train" in modules and "pipelines.command.progress" in modules
    assert result.stdout.strip() == "0 []"
