"""Every benchmark's usage line names it as the user runs it, `python -m bench.NAME`: each
parser in bench/ is made by measure.argument_parser("bench.NAME", …) with its own file's
NAME, or by argparse with that prog (checked in the source: running each --help would import
torch some thirty times)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
# Modules whose parser serves another module's command.
SERVES = {"train_step_args": "train_step"}


def test_every_parser_names_its_own_module():
    wrong = []
    for path in sorted(BENCH.glob("*.py")):
        name = SERVES.get(path.stem, path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            if called.endswith("argument_parser"):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Constant) and first.value == f"bench.{name}"):
                    wrong.append(f"{path.name}: {ast.unparse(node)}")
            elif called.endswith("ArgumentParser") and path.stem != "measure":
                progs = [k.value for k in node.keywords if k.arg == "prog"]
                expected = f"python -m bench.{name}"
                if not (
                    progs and isinstance(progs[0], ast.Constant) and progs[0].value == expected
                ):
                    wrong.append(f"{path.name}: {ast.unparse(node)}")
    assert wrong == []
