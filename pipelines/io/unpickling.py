"""What torch.load(weights_only=True) refused in a file, said without torch's own advice (to
load the file another way: to run the code it may hold). The trainer's checkpoint and
released-model loads and `bertkit inspect` say a refusal so."""

from __future__ import annotations

import pickle
import re

_WEIGHTS_ONLY = "Weights only load failed"
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def unpickling_refused(error: BaseException) -> str | None:
    """The class or function torch.load(weights_only=True) refused to rebuild
    (`posix.system`, `datetime.date`): the file holds more than tensors and plain
    containers. None for any other failure (bytes that are no pickle, a file cut short)."""
    if not isinstance(error, pickle.UnpicklingError) or _WEIGHTS_ONLY not in str(error):
        return None
    named = re.search(r"GLOBAL (\S+)", str(error))
    return named.group(1) if named else None


def load_failure(error: BaseException) -> str:
    """Why torch.load failed, on one line, without colours and without torch's advice: for a
    weights_only refusal its unpickler's own reason ("Unsupported operand 110": bytes that are
    no checkpoint), else the error's first line (a zip archive cut short)."""
    text = _ANSI_ESCAPE.sub("", str(error))
    if _WEIGHTS_ONLY in text:
        found = re.search(r"WeightsUnpickler error:\s*(.*?)(?:\n\s*\n|$)", text, re.S)
        text = found.group(1) if found else "not a file of tensors"
    return f"{type(error).__name__}: {' '.join((text.strip().splitlines() or [''])[0].split())}"
