"""tests/support/cpu_times.py: each test's CPU, in the pytest process and in the processes it
started, apart; and the summary of a run's lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cpu_times import USAGE, main, summary

ROOT = Path(__file__).resolve().parent.parent
BURN = """
import subprocess, sys, time

SPIN = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass"

def test_spins_here():
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass

def test_spins_in_a_child():
    subprocess.run([sys.executable, "-c", SPIN], check=True)
"""


def test_each_test_s_cpu_is_told_apart_in_process_and_in_its_processes(tmp_path):
    (tmp_path / "test_burn.py").write_text(BURN)
    lines = tmp_path / "cpu.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["BERTKIT_CPU_TIMES"] = str(lines)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "tests.support.cpu_times", str(tmp_path / "test_burn.py")],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    here, child = (json.loads(line) for line in lines.read_text().splitlines())
    assert [here["test"].split("::")[1], child["test"].split("::")[1]] == [
        "test_spins_here",
        "test_spins_in_a_child",
    ]
    assert here["in_process_s"] >= 0.3 and here["processes_s"] == 0
    assert child["processes_s"] >= 0.3 and child["in_process_s"] < 0.3


def test_the_summary_adds_up_files_and_ranks_tests():
    lines = [
        {"test": "tests/a.py::x", "in_process_s": 1.0, "processes_s": 4.0, "wall_s": 3.0},
        {"test": "tests/a.py::y", "in_process_s": 2.0, "processes_s": 0.0, "wall_s": 2.0},
        {"test": "tests/b.py::z", "in_process_s": 6.0, "processes_s": 0.5, "wall_s": 7.0},
    ]
    assert summary(lines, top=2).splitlines() == [
        "3 tests: 9 CPU-s in the pytest processes, 4 in the processes they started, "
        "12 s of wall time",
        "",
        "CPU-s  file",
        "   7.0 tests/a.py",
        "   6.5 tests/b.py",
        "",
        "in-proc processes   wall  test",
        "    6.0       0.5    7.0  tests/b.py::z",
        "    1.0       4.0    3.0  tests/a.py::x",
    ]


def test_help_and_an_unreadable_file_get_one_line(tmp_path, capsys):
    assert main(["--help"]) == 0
    assert capsys.readouterr().out == USAGE + "\n"
    missing = tmp_path / "none.jsonl"
    assert main([str(missing)]) == 2
    assert (
        capsys.readouterr().err == f"cpu_times: cannot read {missing}: No such file or directory\n"
    )
    assert main([]) == 2
    assert capsys.readouterr().err == USAGE + "\n"
