"""Where the suite's CPU goes, test by test: a pytest plugin, and a summary of what it wrote.

    BERTKIT_CPU_TIMES=/tmp/cpu.jsonl .venv/bin/python -m pytest -q -n auto --dist loadfile \\
        -p tests.support.cpu_times
    .venv/bin/python -m tests.support.cpu_times /tmp/cpu.jsonl

Each test's line: the CPU seconds of the pytest process itself (every thread of it: a Beam
pipeline run in process, a compile, the test's own loops) and of the processes it started
and waited for (a `bertkit train` subprocess, torchrun's ranks, Beam's worker processes, the
C++ compiler under Inductor), apart, beside the wall time. On CI's 2 cores the suite is
CPU-bound, so the sum of both is what a test costs the run; the wall time alone counts a
test's waits too.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

ENV = "BERTKIT_CPU_TIMES"


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get(ENV)
    if not path:
        yield
        return
    (own, waited), began = _cpu(), time.monotonic()
    yield
    (own_after, waited_after), wall = _cpu(), time.monotonic() - began
    line = {
        "test": item.nodeid,
        "in_process_s": round(own_after - own, 3),
        "processes_s": round(waited_after - waited, 3),
        "wall_s": round(wall, 3),
    }
    with open(path, "a", encoding="utf-8") as out:  # one short write per test, per worker
        out.write(json.dumps(line) + "\n")


def summary(lines: list[dict], top: int = 25) -> str:
    """The totals, the test files by CPU and the `top` tests by CPU, as text."""
    own = sum(line["in_process_s"] for line in lines)
    started = sum(line["processes_s"] for line in lines)
    files: collections.Counter[str] = collections.Counter()
    for line in lines:
        files[line["test"].split("::")[0]] += line["in_process_s"] + line["processes_s"]
    out = [
        f"{len(lines)} tests: {own:.0f} CPU-s in the pytest processes, {started:.0f} in the "
        f"processes they started, {sum(line['wall_s'] for line in lines):.0f} s of wall time"
    ]
    out += ["", "CPU-s  file"] + [f"{cpu:6.1f} {name}" for name, cpu in files.most_common(top)]
    out += ["", "in-proc processes   wall  test"]
    ranked = sorted(lines, key=lambda line: -(line["in_process_s"] + line["processes_s"]))
    out += [
        f"{line['in_process_s']:7.1f} {line['processes_s']:9.1f} {line['wall_s']:6.1f}  "
        f"{line['test']}"
        for line in ranked[:top]
    ]
    return "\n".join(out)


USAGE = "usage: python -m tests.support.cpu_times CPU_TIMES.jsonl"


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        text = Path(argv[0]).read_text(encoding="utf-8")
    except OSError as error:
        print(f"cpu_times: cannot read {argv[0]}: {error.strerror}", file=sys.stderr)
        return 2
    print(summary([json.loads(line) for line in text.splitlines() if line]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
