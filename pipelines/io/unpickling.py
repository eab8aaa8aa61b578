"""What torch.load(weights_only=True) refused in a file that holds more than tensors, said
without torch's own advice (to load the file another way: to run the code it may hold). The
trainer's checkpoint and released-model loads and `bertkit inspect` say a refusal so."""

from __future__ import annotations

import pickle
import re


def unpickling_refused(error: BaseException) -> str | None:
    """What torch.load(weights_only=True) refused to rebuild, where the file holds more than
    tensors and plain containers: the class or function it names (`posix.system`), or "an
    object" where torch names none. None for any other failure (a file cut short, not
    torch's)."""
    text = str(error)
    if not isinstance(error, pickle.UnpicklingError) or "Weights only load failed" not in text:
        return None
    named = re.search(r"GLOBAL (\S+)", text)
    return named.group(1) if named else "an object"
