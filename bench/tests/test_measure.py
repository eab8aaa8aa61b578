"""bench.measure's set-up of a run: bertkit's modules byte-compiled as an installed tool's are."""

from __future__ import annotations

import importlib.util

from bench.measure import BERTKIT_PACKAGES, REPO_ROOT, byte_compile_bertkit


def test_bertkit_runs_from_byte_compiled_modules_like_an_installed_tool() -> None:
    sources = [
        REPO_ROOT / "pipelines" / "text" / "wikitext.py",
        REPO_ROOT / "schemas" / "versions.py",
    ]
    caches = [REPO_ROOT / importlib.util.cache_from_source(str(s)) for s in sources]
    for cache in caches:
        cache.unlink(missing_ok=True)  # Python's own cache of our source, rebuilt below
    byte_compile_bertkit()
    assert BERTKIT_PACKAGES == ("pipelines", "schemas")
    for source, cache in zip(sources, caches, strict=True):
        assert cache.is_file()
        assert cache.stat().st_mtime >= source.stat().st_mtime
