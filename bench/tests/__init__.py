"""The benchmarks' own checks: their pure helpers on literal figures and their comparison rows
on the CPU, run with the tests (pyproject's testpaths). They import bench, so they live here,
beside what they check; nothing under tests/ imports bench.
"""
