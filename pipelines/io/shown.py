"""Record-made strings (ids, keys, file names) fit for a one-line message (Beam-free).

A log line, a reject's error and a failure's one line name records and files; a newline in
an id ("evil\\nERROR bertkit: …") would forge a line of its own, a NUL cut it. `shown`
escapes what may not stand in such a line; `first_control` finds it, for a check that
rejects rather than changes (an id).
"""

from __future__ import annotations

import unicodedata

# What may not stand as it is in a one-line message: control characters (C0, DEL, C1), the
# line and paragraph separators, and lone surrogates (no character, not UTF-8).
_UNSHOWN = {"Cc", "Zl", "Zp", "Cs"}


def first_control(text: str, allowed: str = "") -> str | None:
    """The first character of `text` that `shown` escapes (but those in `allowed`), as
    U+XXXX at its place, or None."""
    for at, char in enumerate(text):
        if unicodedata.category(char) in _UNSHOWN and char not in allowed:
            return f"U+{ord(char):04X} at character {at + 1}"
    return None


def shown(text: str) -> str:
    """`text` for a one-line message: control and separator characters and lone surrogates
    written as escapes (\\n, \\x00, \\u2028, \\udc80), every other character as it is."""
    if first_control(text) is None:
        return text
    return "".join(
        repr(char)[1:-1] if unicodedata.category(char) in _UNSHOWN else char for char in text
    )
