"""The wheel a user builds from the checkout (`pip install .`, `pip wheel .`) holds what its
commands need outside the checkout: the demo's real sample with its attribution, the pages
that `bertkit docs` prints, and the licence. Built from a copy of the tracked files, so the
checkout is left as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_the_sample_its_attribution_the_pages_and_the_licence(tmp_path) -> None:
    source = tmp_path / "src"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if name.startswith(("tests/", "bench/", "infra/")):
            continue  # not in the wheel: less to copy
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, target, follow_symlinks=False)
    pip_wheel = (sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation")
    built = subprocess.run(
        [*pip_wheel, "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("bertkit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sample = sorted(name for name in names if name.startswith("bertkit/sample/"))
    assert sample == [
        "bertkit/sample/ATTRIBUTION.md",
        "bertkit/sample/books/alice29.txt",
        "bertkit/sample/books/asyoulik.txt",
        "bertkit/sample/books/lcet10.txt",
        "bertkit/sample/books/plrabn12.txt",
        "bertkit/sample/wikipedia/"
        "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.xml.bz2",
    ]
    pages = sorted(name for name in names if name.startswith("bertkit/docs/"))
    assert pages == sorted(
        f"bertkit/{name}" for name in tracked.split("\0") if name.startswith("docs/")
    )
    assert len(pages) == 17
    assert "bertkit-0.1.0.dist-info/licenses/LICENSE" in names
    top = {name.split("/")[0] for name in names if not name.startswith("bertkit-0.1.0")}
    assert top == {"bertkit", "pipelines", "schemas", "trainer"}
