"""No test depends on a benchmark: nothing under tests/ imports bench/ or runs one of its modules.

What the tests and the benchmarks both need (loopback servers, the fault proxy, the kill point,
the fault machinery) lives in tests/support/, which bench/ may import; the benchmarks' own
checks live beside them in bench/tests/. Read from every file's source with ast, so a lazy
import inside a function counts, and so does a command line running `-m bench.X`.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BENCH_MODULE = re.compile(r"bench(\.\w+)*")  # a whole string naming bench or a module of it


def run_modules(node: ast.List | ast.Tuple) -> list[str]:
    """The modules a literal command line runs: each string after a "-m"."""
    items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return [m for flag, m in itertools.pairwise(items) if flag == "-m" and m]


def bench_references(source: str) -> list[str]:
    """Every import of bench, and every `-m bench…` of a literal command line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.List | ast.Tuple):
            names = [m for m in run_modules(node) if BENCH_MODULE.fullmatch(str(m))]
        else:
            continue
        found += [f"line {node.lineno}: {name}" for name in names if name.split(".")[0] == "bench"]
    return found


def test_no_file_under_tests_imports_bench() -> None:
    problems = {
        str(path.relative_to(TESTS.parent)): refs
        for path in sorted(TESTS.rglob("*.py"))
        if (refs := bench_references(path.read_text("utf-8")))
    }
    assert problems == {}


def test_imports_and_module_names_of_bench_are_found() -> None:
    source = (
        "import bench\n"
        "from bench.measure import fmt\n"
        "def f():\n"
        "    import bench.loader as loader\n"
        "cmd = ['python', '-m', 'bench.faults', '--kills', '1']\n"
        "doc = 'python -m bench.faults runs the campaign'  # prose, not a command line\n"
        "layers = ('schemas', 'bench')\n"
        "from tests.support.s3server import free_port\n"
        "import benchmark_tools\n"
    )
    assert bench_references(source) == [
        "line 1: bench",
        "line 2: bench.measure",
        "line 4: bench.loader",
        "line 5: bench.faults",
    ]
