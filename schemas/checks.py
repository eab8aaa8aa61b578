"""Checks every record applies to what it reads: a manifest is input, and input is not
trusted. Each check names the field (`outputs.seq128.splits.train.shards[3].samples`) and
what it must be; the reader adds which file it was.

Paths a manifest lists must stay inside its directory: relative, no `..`, no scheme, no
drive or root, so a manifest can never make a reader open `/dev/zero`, `/etc/passwd` or a
URL of its choosing.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SHA256 = re.compile(r"[0-9a-f]{64}")

# Reads of files whose size no manifest records are bounded all the same: a manifest, a
# metadata record or a vocabulary file is never larger than these (the shards manifest takes
# ~490 bytes a shard, its blocks being in each shard's block table: ~10 MB for 20,000
# shards, a billion samples), so a path that names `/dev/zero` or a huge file fails after
# reading just past the bound instead of filling the memory.
MAX_RECORD_BYTES = 256 << 20  # manifest.json, _manifest.json, vocab.json
MAX_VOCAB_FILE_BYTES = 256 << 20  # vocab.txt, tokenizer.json


# A record is a few levels deep (a shards manifest: 6, outputs → splits → shards → entry →
# block_table); JSON nested deeper is not one. Python's parser recurses once a level, so JSON
# nested past its recursion limit raises RecursionError, not a ValueError.
MAX_JSON_DEPTH = 32


class RecordError(ValueError):
    """A field of a record has the wrong type or value."""


def load_json(text: str | bytes) -> Any:
    """`json.loads` for every JSON bertkit reads as input (manifests, block tables,
    vocab.json): JSON nested deeper than MAX_JSON_DEPTH, as deep as Python's recursion limit
    included, is a RecordError (a ValueError, which each reader reports naming its file)."""
    try:
        value = json.loads(text)
    except RecursionError as error:
        raise RecordError(
            f"JSON nested too deep to parse ({error}); a bertkit record is at most "
            f"{MAX_JSON_DEPTH} levels deep"
        ) from error
    _check_depth(value)
    return value


def _check_depth(value: Any) -> None:
    """Refuse lists and objects nested past MAX_JSON_DEPTH, walked without recursion (what
    walks a record next, `asdict` or `json.dumps`, recurses)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise RecordError(
                f"JSON nested more than {MAX_JSON_DEPTH} levels deep; a bertkit record is "
                "never that deep"
            )
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children)


def need_int(value: Any, field: str, minimum: int = 0, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{field} must be an integer, not {type(value).__name__} {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise RecordError(f"{field} is {value}: it must be at least {minimum}{upper}")


def need_str(value: Any, field: str) -> None:
    if not isinstance(value, str):
        raise RecordError(f"{field} must be a string, not {type(value).__name__} {value!r}")


def need_sha256(value: Any, field: str) -> None:
    need_str(value, field)
    if not _SHA256.fullmatch(value):
        raise RecordError(f"{field} is {value[:80]!r}: not a sha256 (64 lower-case hex digits)")


def need_dict(value: Any, field: str) -> None:
    if not isinstance(value, dict):
        raise RecordError(f"{field} must be an object, not {type(value).__name__}")


def need_list(value: Any, field: str) -> None:
    if not isinstance(value, list):
        raise RecordError(f"{field} must be a list, not {type(value).__name__}")


def need_bool(value: Any, field: str) -> None:
    if not isinstance(value, bool):
        raise RecordError(f"{field} must be true or false, not {type(value).__name__} {value!r}")


def need_relative_path(value: Any, field: str) -> None:
    """A path inside the manifest's directory: relative, `/`-separated, no `.`/`..` parts."""
    need_str(value, field)
    parts = value.split("/")
    if (
        not value
        or "\\" in value
        or ":" in value
        or value.startswith("/")
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise RecordError(
            f"{field} is {value[:200]!r}: a manifest lists paths inside its own directory "
            "(relative, no '..', no scheme or drive)"
        )
