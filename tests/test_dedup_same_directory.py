"""`bertkit dedup` refuses one documents directory given twice under two spellings (a
trailing slash, `D/../D`, a symbolic link; for URLs `//`, `.` and `..` segments), as it
refuses the literal repeat: each of its documents would be reported a duplicate of itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import dedup
from pipelines.io.places import same_place_key
from tests.test_dedup import literal_inputs


@pytest.mark.parametrize(
    "spelling",
    [
        lambda d: f"{d}/../{d.name}/",  # D/../D/
        lambda d: f"{d.parent}/./{d.name}//",
        lambda d: f"{d.parent / 'link'}",  # a symbolic link to D
    ],
)
def test_one_directory_under_two_spellings_is_refused_before_any_work(
    tmp_path: Path, capsys, spelling
) -> None:
    first, _ = literal_inputs(tmp_path)
    (first.parent / "link").symlink_to(first, target_is_directory=True)
    other = spelling(first)
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        dedup.main(["--documents", str(first), other, "--output", str(output)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        f"bertkit dedup: error: --documents {other} is the same directory as --documents {first}: "
        "each of its documents would duplicate itself; name each directory once\n"
    )
    assert not output.exists()


def test_urls_compare_after_normalisation() -> None:
    assert same_place_key("s3://b/docs") == "s3://b/docs"
    for spelling in ("s3://b/docs/", "s3://b//docs", "s3://b/x/../docs", "s3://b/./docs//"):
        assert same_place_key(spelling) == "s3://b/docs"
    assert same_place_key("s3://b/docs2") != same_place_key("s3://b/docs")
    assert same_place_key("gs://b/docs") != same_place_key("s3://b/docs")


def test_one_url_under_two_spellings_is_refused_before_any_request(tmp_path, capsys) -> None:
    """No server is there: the refusal comes before anything is read."""
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        dedup.main(["--documents", "s3://b/docs", "s3://b//x/../docs/", "--output", str(output)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        "bertkit dedup: error: --documents s3://b//x/../docs/ is the same directory as "
        "--documents s3://b/docs: each of its documents would duplicate itself; name each "
        "directory once\n"
    )
    assert not output.exists()
