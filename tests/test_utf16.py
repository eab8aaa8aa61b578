"""pipelines/io/utf16.py: the UTF-16 decoder `wikipedia`, `books` and `corpus` share, and a
file's head and mark; exact values on literal bytes, cut into chunks at every byte."""

from __future__ import annotations

import codecs
from collections.abc import Iterable

import pytest

from pipelines.io.utf16 import DamagedUtf16, head_of, utf16_as_utf8, utf16_mark

MARKED = codecs.BOM_UTF16_LE + "ab😀\n".encode("utf-16-le")  # 2 + 10 bytes


def converted(chunks: Iterable[bytes]) -> tuple[bytes, str | None, str | None]:
    """What the decoder gave before it stopped, and its error's message and reason."""
    given = []
    try:
        for chunk in utf16_as_utf8(chunks, "utf-16-le", "in/x.txt"):
            given.append(chunk)
    except DamagedUtf16 as err:
        return b"".join(given), str(err), err.reason
    return b"".join(given), None, None


def every_cut(data: bytes) -> list[list[bytes]]:
    """``data`` whole, in two pieces cut at every byte, and byte by byte."""
    return [
        [data],
        *([data[:at], data[at:]] for at in range(len(data) + 1)),
        [data[at : at + 1] for at in range(len(data))],
    ]


def test_utf16_is_given_as_utf8_with_its_mark_however_it_is_cut() -> None:
    for chunks in every_cut(MARKED):
        assert converted(chunks) == ("\ufeffab😀\n".encode(), None, None)


@pytest.mark.parametrize(
    ("damage", "given", "error", "reason"),
    [
        (  # a low surrogate alone
            b"\x00\xdc",
            "\ufeffab😀\nc",
            "not UTF-16LE as its byte order mark says (illegal encoding): the file is damaged "
            "at decompressed byte 14",
            "corrupt_input",
        ),
        (  # a high surrogate before a character that is not a low one
            b"\x00\xd8d\x00",
            "\ufeffab😀\nc",
            "not UTF-16LE as its byte order mark says (illegal UTF-16 surrogate): the file is "
            "damaged at decompressed byte 14",
            "corrupt_input",
        ),
        (  # an odd byte at the end
            b"d",
            "\ufeffab😀\nc",
            "not UTF-16LE as its byte order mark says (truncated data): the file is cut short "
            "at decompressed byte 14",
            "truncated_input",
        ),
        (  # a high surrogate at the end
            b"\x00\xd8",
            "\ufeffab😀\nc",
            "not UTF-16LE as its byte order mark says (unexpected end of data): the file is "
            "cut short at decompressed byte 14",
            "truncated_input",
        ),
    ],
    ids=["lone-low", "lone-high", "odd-byte", "cut-pair"],
)
def test_every_character_before_the_damage_is_given_then_its_byte(
    damage: bytes, given: str, error: str, reason: str
) -> None:
    data = MARKED + b"c\x00" + damage  # the damage at byte 14
    for chunks in every_cut(data):
        assert converted(chunks) == (given.encode(), f"in/x.txt: {error}", reason)


def test_the_damage_after_a_chunk_of_good_text_keeps_that_chunk() -> None:
    # The damage inside the second chunk: its first character is given, then the error.
    assert converted([MARKED, b"c\x00\x00\xdcd\x00"])[:2] == (
        "\ufeffab😀\nc".encode(),
        "in/x.txt: not UTF-16LE as its byte order mark says (illegal encoding): the file is "
        "damaged at decompressed byte 14",
    )


def test_head_and_mark() -> None:
    head, chunks = head_of(iter([b"\xff", b"\xfe", b"a\x00", b"b\x00", b"c\x00"]), 4)
    assert (head, list(chunks)) == (b"\xff\xfea\x00", [b"\xff\xfea\x00", b"b\x00", b"c\x00"])
    head, chunks = head_of(iter([]), 4)
    assert (head, list(chunks)) == (b"", [])
    assert [
        utf16_mark(head)
        for head in (b"\xff\xfea\x00", b"\xfe\xff\x00a", b"\xff\xfe\x00\x00", b"\xff\xfe", b"ab")
    ] == ["utf-16-le", "utf-16-be", None, "utf-16-le", None]
