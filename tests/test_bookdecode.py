"""pipelines/text/bookdecode.py: a book file's bytes → lines of text, exact values on literal
bytes (both formats of `bertkit books` read through it)."""

from __future__ import annotations

import codecs
import dataclasses
import tracemalloc

import pytest

from pipelines.io.utf16 import DamagedUtf16
from pipelines.text.bookdecode import (
    BookTextError,
    DecodedBook,
    DecodeStats,
    LongTextLine,
    book_lines,
    decode_book,
)

UTF8 = DecodeStats()


def decoded(data: bytes, **kwargs) -> tuple[str, DecodeStats]:
    book = decode_book(data, **kwargs)
    return book.text, book.stats


def refusal(data: bytes) -> str:
    with pytest.raises(BookTextError) as info:
        decode_book(data)
    return str(info.value)


# --------------------------------------------------------------------------------------
# Encodings: UTF-8, cp1252 line by line, UTF-16 by its mark
# --------------------------------------------------------------------------------------


def test_utf8_and_ascii() -> None:
    assert decoded("café – “quoted”\n".encode()) == ("café – “quoted”", UTF8)
    assert decode_book(b"plain ascii") == DecodedBook("plain ascii", (), UTF8)


def test_a_utf8_byte_order_mark_is_removed_wherever_it_is() -> None:
    assert decoded(b"\xef\xbb\xbfhello\n") == ("hello", UTF8)
    # Two files joined: the second one's mark is inside the text, a character removed.
    assert decoded(b"\xef\xbb\xbfone\n\xef\xbb\xbftwo") == (
        "one\ntwo",
        DecodeStats(controls_removed=1),
    )


def test_a_line_that_is_not_utf8_is_cp1252_and_the_others_stay_utf8() -> None:
    data = "Café “one”.\n".encode() + b"\x93Two\x94 na\xefve.\n" + "Three ‘3’.".encode()
    assert decoded(data) == ("Café “one”.\n“Two” naïve.\nThree ‘3’.", DecodeStats(fallback_lines=1))


def test_cp1252_undefined_bytes_are_removed_not_c1_controls() -> None:
    data = b"\x93Quoted\x94 \x96 dash.\nA byte \x81\x8d\x8f\x90\x9d here.\n"
    text, stats = decoded(data)
    assert text == "“Quoted” – dash.\nA byte  here."
    assert stats == DecodeStats(fallback_lines=2, controls_removed=5)


def test_a_mark_on_cp1252_bytes_is_removed_too() -> None:
    assert decoded(b"\xef\xbb\xbfcaf\xe9") == ("café", DecodeStats(fallback_lines=1))


@pytest.mark.parametrize(
    ("codec", "name"), [("utf-16-le", "utf-16-le"), ("utf-16-be", "utf-16-be")]
)
def test_utf16_with_a_byte_order_mark_is_read(codec: str, name: str) -> None:
    data = ("\ufeffCafé “one”.\r\nTwo 😀.\r\n").encode(codec)
    assert decoded(data) == ("Café “one”.\nTwo 😀.", DecodeStats(encoding=name))


def test_utf16_cut_inside_a_character_fails_the_file_at_its_byte() -> None:
    data = codecs.BOM_UTF16_LE + "Some words here.".encode("utf-16-le") + b"x"
    with pytest.raises(DamagedUtf16) as info:
        decode_book(data, path="in/b.txt")
    assert (info.value.position, info.value.reason) == ("decompressed byte 34", "truncated_input")
    assert str(info.value) == (
        "in/b.txt: not UTF-16LE as its byte order mark says (truncated data): the file is cut "
        "short at decompressed byte 34"
    )


def test_damaged_utf16_gives_every_whole_line_before_it_then_fails() -> None:
    text = "One here.\nTwo 😀.\nThree he"
    data = (
        codecs.BOM_UTF16_BE + text.encode("utf-16-be") + b"\xdc\x00" + "re.\n".encode("utf-16-be")
    )
    pieces = [data[at : at + 3] for at in range(0, len(data), 3)]  # characters cut anywhere
    got: list[str | LongTextLine] = []
    with pytest.raises(DamagedUtf16) as info:
        got.extend(book_lines(pieces, path="b.txt"))
    assert got == ["One here.", "Two 😀."]
    assert (info.value.position, info.value.reason) == ("decompressed byte 54", "corrupt_input")
    assert str(info.value) == (
        "b.txt: not UTF-16BE as its byte order mark says (illegal encoding): the file is "
        "damaged at decompressed byte 54"
    )


def test_utf16_without_a_mark_says_how_to_convert_it() -> None:
    assert refusal("Some words of a book.\n".encode("utf-16-le")) == (
        "looks like UTF-16LE text without a byte-order mark (a NUL at every other byte), "
        "which cannot be told from binary data for sure: convert it to UTF-8 first, e.g. "
        "iconv -f UTF-16LE -t UTF-8 FILE > FILE.utf8.txt"
    )
    assert "looks like UTF-16BE text" in refusal("Some words.".encode("utf-16-be"))


def test_utf32_is_refused() -> None:
    assert refusal("Some words.".encode("utf-32")) == (
        "looks like UTF-32 text (a UTF-32 byte-order mark): convert it to UTF-8 first, e.g. "
        "iconv -f UTF-32 -t UTF-8 FILE > FILE.utf8.txt"
    )


# --------------------------------------------------------------------------------------
# Line ends, control characters, NUL bytes
# --------------------------------------------------------------------------------------


def test_crlf_and_lone_cr_end_lines() -> None:
    assert decoded(b"a\r\nb\rc\nd\r\n\r\ne")[0] == "a\nb\nc\nd\n\ne"
    assert decoded(b"\x93a\x94\r\nb\rc") == ("“a”\nb\nc", DecodeStats(fallback_lines=1))


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    chunks = [b"one\r", b"\ntwo\r", b"three\r"]
    assert list(book_lines(chunks)) == ["one", "two", "three"]


def test_control_characters_are_removed_and_counted() -> None:
    # FF and VT (page breaks) are spaces; NUL, ESC, DEL, SUB, C1 (here spelt in UTF-8) are
    # removed; TAB is kept for the reflow.
    data = b"page one\x0cpage\ttwo\x0bthree\x1b\x7f\x00 words \xc2\x85end" + b" more" * 20
    text, stats = decoded(data + b"\r\n\x1a")
    assert text == "page one page\ttwo three words end" + " more" * 20 + "\n"
    assert stats == DecodeStats(controls_removed=5)


def test_one_rule_for_nul_bytes_a_few_anywhere_are_removed_and_counted() -> None:
    early, late = b"A stray\x00 NUL.\n" + b"a" * 9000, b"a" * 9000 + b"\nLate\x00 NUL.\n"
    assert decoded(early) == ("A stray NUL.\n" + "a" * 9000, DecodeStats(controls_removed=1))
    assert decoded(late) == ("a" * 9000 + "\nLate NUL.", DecodeStats(controls_removed=1))


def test_many_control_bytes_in_the_head_are_binary() -> None:
    assert refusal(b"PK\x03\x04\x14\x00\x00\x00text") == (
        "looks binary: 6 of its first 12 bytes are control characters (3 of them NUL), and "
        "text holds few or none"
    )
    assert refusal(bytes(range(1, 9)) * 10 + b"x" * 20) == (
        "looks binary: 80 of its first 100 bytes are control characters (0 of them NUL), and "
        "text holds few or none"
    )
    assert decoded(b"\x01" + b"x" * 99) == ("x" * 99, DecodeStats(controls_removed=1))


def test_empty_and_blank_files_are_no_text() -> None:
    assert refusal(b"") == "file is empty"
    assert refusal(b" \r\n\t\x1a\r\n") == "file has no text: only whitespace and control characters"
    assert issubclass(BookTextError, ValueError)


# --------------------------------------------------------------------------------------
# Long lines
# --------------------------------------------------------------------------------------


def test_long_lines_are_left_out_and_named() -> None:
    data = "Short line.\n" + "x" * 40 + "\nStill here.\n" + "é" * 11 + "\nLast."
    book = decode_book(data.encode(), max_line_bytes=21)
    assert book.text == "Short line.\n\nStill here.\n\nLast."
    assert book.long_lines == (LongTextLine(2, 40), LongTextLine(4, 22))  # é is 2 bytes
    assert book.long_lines[0].error(21) == (
        "line 2 is 40 bytes, over the 21-byte line limit (--max_line_kb): no sentence is that "
        "long; the line is skipped, the rest kept"
    )
    assert decode_book(b"x" * 21 + b"\n" + "é".encode() * 10, max_line_bytes=21).long_lines == ()


def test_a_file_of_one_long_line_is_text_too_long_not_no_text() -> None:
    assert decode_book(b"z" * 30, max_line_bytes=21) == DecodedBook("", (LongTextLine(1, 30),))


def test_book_lines_hold_one_line_at_a_time() -> None:
    # 16 MiB of 70-character lines in 1 MiB chunks: memory stays under a few chunks.
    chunk = (b"a" * 69 + b"\n") * ((1 << 20) // 70)
    tracemalloc.start()
    count = sum(1 for _ in book_lines(chunk for _ in range(16)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 16 * ((1 << 20) // 70)
    assert peak < 4 << 20, peak


def test_decoded_book_is_frozen() -> None:
    book = decode_book(b"x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        book.text = "y"  # type: ignore[misc]
