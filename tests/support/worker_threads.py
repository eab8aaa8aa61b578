"""Imported first of all by tests/conftest.py and bench/tests/conftest.py, before torch:
under pytest-xdist (`-n auto`) each worker is one of N test processes sharing the machine's
cores, and torch's default, a thread per core in each, would run N times as many threads as
there are cores, and their OpenMP spin-waits then take much of the suite's time (the
figure is in CONTRIBUTING.md). Each worker takes its share of the cores instead, unless
OMP_NUM_THREADS was set; the commands a test starts inherit it. torch reads the variable
when it is first imported."""

import os

_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))
