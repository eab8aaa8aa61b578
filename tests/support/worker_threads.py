"""Imported first of all by tests/conftest.py and bench/tests/conftest.py, before torch:
under pytest-xdist (`-n auto`) each worker is one of N test processes sharing the machine's
cores, and torch's default, a thread per core in each, would run N times as many threads as
there are cores, and their OpenMP spin-waits then take much of the suite's time (the
figure is in CONTRIBUTING.md). Each worker takes its share of the cores instead, unless
OMP_NUM_THREADS was set; the commands a test starts inherit it. torch reads the variable
when it is first imported. Inductor's compile pool is sized the same way: by default a
process per core in every test process that compiles, each importing torch first; with a
share of 1 it compiles in the process itself (the saving is in docs/benchmarks.md, "The test
suite").

In every test process, whatever the workers: Inductor's C++ kernels for the CPU are
generated scalar (`TORCHINDUCTOR_VEC_ISA_OK=0`), not for the machine's vector ISA, unless
the variable was set. The CPU is no target of `--compile` (the GPU's kernels are Triton's);
what the compiled tests check, one graph, no break, eager's numbers, the compile cache, is
the same either way, and g++ builds a scalar kernel in much less time: a test's cold
compile is mostly g++."""

import os

_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    os.environ.setdefault("OMP_NUM_THREADS", _SHARE)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", _SHARE)

os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "0")
